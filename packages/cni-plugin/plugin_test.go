package main

// The plugin against a fake agent: an HTTP server on a unix socket in the test's temp dir that
// records what it is sent and answers as told. No namespace or plugin runs here; the plugin with
// the real agent and real runtimes is tested in integration/.

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeAgent struct {
	mu       sync.Mutex
	ready    bool
	status   int
	answer   string
	requests []request
	readyz   int
	server   *http.Server
}

func startAgent(t *testing.T, socket string, ready bool, status int, answer string) *fakeAgent {
	t.Helper()
	a := &fakeAgent{ready: ready, status: status, answer: answer}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.readyz++
		if !a.ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/v1/cni", func(w http.ResponseWriter, r *http.Request) {
		var req request
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.requests = append(a.requests, req)
		status, answer := a.status, a.answer
		if !a.ready {
			// As the agent does before restore and the queue replay are done.
			status, answer = http.StatusServiceUnavailable, `{"cniVersion":"1.0.0","code":11,"msg":"not ready"}`
		}
		a.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	})
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	a.server = &http.Server{Handler: mux}
	go func() { _ = a.server.Serve(listener) }()
	t.Cleanup(func() { _ = a.server.Close() })
	return a
}

func (a *fakeAgent) seen() []request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]request(nil), a.requests...)
}

type invocation struct {
	env    map[string]string
	config string
}

func invoke(inv invocation) (int, string) {
	var out bytes.Buffer
	status := run(call{
		env:        func(key string) string { return inv.env[key] },
		stdin:      strings.NewReader(inv.config),
		stdout:     &out,
		delAttempt: 300 * time.Millisecond,
	})
	return status, out.String()
}

func configFor(dir string, extra string) string {
	return `{"cniVersion":"1.0.0","name":"web","type":"allocnet-cni","socket":"` +
		filepath.Join(dir, "cni.sock") + `","queueDir":"` + filepath.Join(dir, "queue") + `"` + extra + `}`
}

func envOf(command string) map[string]string {
	return map[string]string{
		"CNI_COMMAND":     command,
		"CNI_CONTAINERID": "c1",
		"CNI_NETNS":       "/run/netns/c1",
		"CNI_IFNAME":      "eth0",
		"CNI_ARGS":        "IgnoreUnknown=1;K8S_POD_NAME=p",
		"CNI_PATH":        "/usr/lib/cni",
	}
}

func decodeError(t *testing.T, out string) cniError {
	t.Helper()
	var e cniError
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("not a CNI error: %q", out)
	}
	return e
}

func TestFingerprintWithoutCommand(t *testing.T) {
	status, out := invoke(invocation{env: map[string]string{}})
	if status != 0 || out != "allocnet-cni v"+Version+"\n" {
		t.Fatalf("got %d %q", status, out)
	}
}

func TestVersionNeedsNoAgent(t *testing.T) {
	status, out := invoke(invocation{env: map[string]string{"CNI_COMMAND": "VERSION"}})
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if status != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("got %d %q", status, out)
	}
	if v.CNIVersion != "1.0.0" || strings.Join(v.SupportedVersions, ",") != "0.3.0,0.3.1,0.4.0,1.0.0,1.1.0" {
		t.Fatalf("got %+v", v)
	}
}

func TestVersionReadsItsStdin(t *testing.T) {
	stdin := strings.NewReader(`{"cniVersion":"1.1.0"}`)
	var out bytes.Buffer
	status := run(call{env: func(key string) string { return map[string]string{"CNI_COMMAND": "VERSION"}[key] }, stdin: stdin, stdout: &out})
	if status != 0 || stdin.Len() != 0 {
		t.Fatalf("got %d, %d bytes of stdin left unread", status, stdin.Len())
	}
}

func TestAddForwardsEnvAndConfigAndPrintsTheResult(t *testing.T) {
	dir := t.TempDir()
	result := `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/run/netns/c1"}],"ips":[{"address":"172.26.64.2/20","interface":0}]}`
	agent := startAgent(t, filepath.Join(dir, "cni.sock"), true, 200, result)
	config := configFor(dir, `,"runtimeConfig":{"portMappings":[{"HostPort":8080,"ContainerPort":80,"Protocol":"tcp"}]}`)
	status, out := invoke(invocation{env: envOf("ADD"), config: config})
	if status != 0 || out != result {
		t.Fatalf("got %d %q", status, out)
	}
	seen := agent.seen()
	if len(seen) != 1 {
		t.Fatalf("the agent saw %d requests", len(seen))
	}
	// One round trip to a ready agent: no /readyz before the call.
	agent.mu.Lock()
	readyz := agent.readyz
	agent.mu.Unlock()
	if readyz != 0 {
		t.Fatalf("asked /readyz %d times before an ADD to a ready agent", readyz)
	}
	for key, value := range envOf("ADD") {
		if seen[0].Env[key] != value {
			t.Fatalf("env %s: got %q, want %q", key, seen[0].Env[key], value)
		}
	}
	var sent, given interface{}
	_ = json.Unmarshal(seen[0].Config, &sent)
	_ = json.Unmarshal([]byte(config), &given)
	if a, b := mustJSON(sent), mustJSON(given); a != b {
		t.Fatalf("config: got %s, want %s", a, b)
	}
}

func mustJSON(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTheAgentsErrorPassesThrough(t *testing.T) {
	dir := t.TempDir()
	answer := `{"cniVersion":"1.0.0","code":7,"msg":"CNI_IFNAME \"a b\" contains whitespace"}`
	startAgent(t, filepath.Join(dir, "cni.sock"), true, 400, answer)
	status, out := invoke(invocation{env: envOf("ADD"), config: configFor(dir, "")})
	if status != 1 || out != answer {
		t.Fatalf("got %d %q", status, out)
	}
}

func TestAnAnswerThatIsNoCNIErrorIsOne(t *testing.T) {
	dir := t.TempDir()
	startAgent(t, filepath.Join(dir, "cni.sock"), true, 502, "bad gateway")
	status, out := invoke(invocation{env: envOf("CHECK"), config: configFor(dir, "")})
	e := decodeError(t, out)
	if status != 1 || e.Code != 999 || e.Msg != "the allocnet agent answered 502 without a CNI error" || e.Details != "bad gateway" {
		t.Fatalf("got %d %+v", status, e)
	}
}

func TestAddWaitsForTheAgentToBeReady(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "cni.sock")
	go func() {
		time.Sleep(400 * time.Millisecond)
		startAgent(t, socket, true, 200, `{"cniVersion":"1.0.0"}`)
	}()
	status, out := invoke(invocation{env: envOf("ADD"), config: configFor(dir, `,"readyTimeoutMs":5000`)})
	if status != 0 || out != `{"cniVersion":"1.0.0"}` {
		t.Fatalf("got %d %q", status, out)
	}
}

func TestAddFailsWithTryAgainLaterAfterTheLimit(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "cni.sock")
	startAgent(t, socket, false, 200, "{}")
	began := time.Now()
	status, out := invoke(invocation{env: envOf("ADD"), config: configFor(dir, `,"readyTimeoutMs":300`)})
	e := decodeError(t, out)
	if status != 1 || e.Code != 11 || e.CNIVersion != "1.0.0" ||
		e.Msg != `the allocnet agent at "`+socket+`" is not ready within 300 ms; try again later` ||
		e.Details != "/readyz answered 503" {
		t.Fatalf("got %d %+v", status, e)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("waited %v", waited)
	}
}

func TestCheckAndStatusWithoutAnAgent(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "cni.sock")
	status, out := invoke(invocation{env: envOf("CHECK"), config: configFor(dir, "")})
	if e := decodeError(t, out); status != 1 || e.Code != 11 || !strings.Contains(e.Msg, socket) {
		t.Fatalf("CHECK: got %d %+v", status, e)
	}
	status, out = invoke(invocation{env: envOf("STATUS"), config: configFor(dir, "")})
	if e := decodeError(t, out); status != 1 || e.Code != 50 ||
		e.Msg != `the allocnet agent at "`+socket+`" is not reachable` {
		t.Fatalf("STATUS: got %d %+v", status, e)
	}
}

func TestDelWithoutAnAgentIsQueuedNotDropped(t *testing.T) {
	dir := t.TempDir()
	config := configFor(dir, "")
	status, out := invoke(invocation{env: envOf("DEL"), config: config})
	if status != 0 || out != "" {
		t.Fatalf("got %d %q", status, out)
	}
	// A second DEL of the same attachment replaces the first.
	if status, _ := invoke(invocation{env: envOf("DEL"), config: config}); status != 0 {
		t.Fatalf("second DEL: %d", status)
	}
	files, err := filepath.Glob(filepath.Join(dir, "queue", "*.del"))
	if err != nil || len(files) != 1 {
		t.Fatalf("queue: %v %v", files, err)
	}
	if filepath.Base(files[0]) != queueName(envOf("DEL"), "web") {
		t.Fatalf("queue file %s", files[0])
	}
	data, _ := os.ReadFile(files[0])
	var q queued
	if err := json.Unmarshal(data, &q); err != nil {
		t.Fatal(err)
	}
	if q.Env["CNI_COMMAND"] != "DEL" || q.Env["CNI_CONTAINERID"] != "c1" || q.Env["CNI_NETNS"] != "/run/netns/c1" || q.QueuedAtUnixMs == 0 {
		t.Fatalf("queued %+v", q)
	}
	var sent, given interface{}
	_ = json.Unmarshal(q.Config, &sent)
	_ = json.Unmarshal([]byte(config), &given)
	if mustJSON(sent) != mustJSON(given) {
		t.Fatalf("config %s", q.Config)
	}
	// Nothing but the lock and the DEL: no temporary file is left behind.
	entries, _ := os.ReadDir(filepath.Join(dir, "queue"))
	if len(entries) != 2 {
		t.Fatalf("queue dir holds %d entries", len(entries))
	}
}

func TestDelToANotReadyAgentIsQueued(t *testing.T) {
	dir := t.TempDir()
	agent := startAgent(t, filepath.Join(dir, "cni.sock"), false, 503, `{"cniVersion":"1.0.0","code":11,"msg":"not ready"}`)
	status, _ := invoke(invocation{env: envOf("DEL"), config: configFor(dir, "")})
	files, _ := filepath.Glob(filepath.Join(dir, "queue", "*.del"))
	if status != 0 || len(files) != 1 || len(agent.seen()) != 1 {
		t.Fatalf("got %d, queued %v", status, files)
	}
}

func TestDelToAReadyAgentIsForwarded(t *testing.T) {
	dir := t.TempDir()
	agent := startAgent(t, filepath.Join(dir, "cni.sock"), true, 200, "")
	status, out := invoke(invocation{env: envOf("DEL"), config: configFor(dir, "")})
	files, _ := filepath.Glob(filepath.Join(dir, "queue", "*.del"))
	if status != 0 || out != "" || len(files) != 0 || len(agent.seen()) != 1 {
		t.Fatalf("got %d %q, queued %v", status, out, files)
	}
}

func TestBadConfigurations(t *testing.T) {
	cases := []struct {
		config string
		code   int
		msg    string
	}{
		{"not json", 6, "the network configuration on stdin is not JSON"},
		{`{"cniVersion":"0.4.0","readyTimeoutMs":-1}`, 7, "readyTimeoutMs should be 0 or more, got -1"},
		{strings.Repeat(" ", 1<<20+1), 4, "the network configuration on stdin is over 1 MiB"},
	}
	for _, c := range cases {
		status, out := invoke(invocation{env: envOf("ADD"), config: c.config})
		if e := decodeError(t, out); status != 1 || e.Code != c.code || e.Msg != c.msg {
			t.Fatalf("%.20q: got %d %+v", c.config, status, e)
		}
	}
}
