// allocnet-cni: the thin CNI plugin a container runtime execs (Nomad through go-cni, containerd's
// CRI, podman). It forwards each call to the allocnet agent's CNI server over a unix socket and
// prints the agent's answer, so the agent's guarantees (durable records, rollback, the teardown
// audit, leak reaping) hold for every runtime. It is Go, stdlib only, because a runtime starts it
// for every call: a Go process costs ~2 ms and ~5 MB, a Node one ~60-70 ms and ~45 MB.
//
// The protocol (docs/cni-plugin.md): POST /v1/cni with {"env": {CNI_*}, "config": <stdin>}; 200
// with the result (empty for DEL and CHECK), or a non-2xx whose body is the spec's error JSON (503
// while the agent is not ready yet). GET /readyz answers 200 once the agent serves.
//
// Every call goes straight to the agent (one round trip when it serves). When the agent cannot be
// reached or is not ready: VERSION needs no agent; ADD waits for /readyz up to `readyTimeoutMs`,
// tries again, and then fails with code 11 (try again later); CHECK and GC fail with 11 at once;
// STATUS answers 50; DEL makes one short attempt, then queues the call in `queueDir` (one
// file per container id, ifname and network, written under a shared lock and renamed into place)
// and succeeds: the agent replays the queue, under the exclusive lock, before it turns ready. A
// DEL is never dropped.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is what the plugin prints with no CNI_COMMAND (Nomad fingerprints plugins so). A var,
// so that tools/package.sh can stamp the package's version in (-ldflags -X main.Version=…).
var Version = "0.1.0"

const (
	defaultSocket         = "/run/allocnet/cni.sock"
	defaultQueueDir       = "/var/lib/allocnet/cni-queue"
	defaultReadyTimeoutMs = 15000
	// One DEL attempt while the agent may be down: long enough for a connect and a busy agent's
	// answer to start, short enough that a runtime's teardown does not hang on a dead agent.
	delAttemptTimeout = 3 * time.Second
	readyPoll         = 100 * time.Millisecond
	statusOK          = 200
	statusUnavailable = 503
)

// The CNI_* variables forwarded to the agent.
var envKeys = []string{"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH"}

// The spec versions this plugin (through the agent) speaks.
var supportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// cniError is the spec's error object; its code is also the reason for a non-zero exit.
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

func (e *cniError) Error() string { return e.Msg }

// pluginConfig is what the plugin reads of its own configuration; the agent reads the rest.
type pluginConfig struct {
	CNIVersion     string `json:"cniVersion"`
	Name           string `json:"name"`
	Socket         string `json:"socket"`
	QueueDir       string `json:"queueDir"`
	ReadyTimeoutMs *int   `json:"readyTimeoutMs"`
}

// call is one invocation: its environment, its stdin, and where its answer goes.
type call struct {
	env    func(string) string
	stdin  io.Reader
	stdout io.Writer
	// Overrides for tests: how long DEL tries before it queues.
	delAttempt time.Duration
}

// request is the body of POST /v1/cni.
type request struct {
	Env    map[string]string `json:"env"`
	Config json.RawMessage   `json:"config"`
}

// queued is a DEL the agent could not take, as the queue file holds it.
type queued struct {
	QueuedAtUnixMs int64             `json:"queuedAtUnixMs"`
	Env            map[string]string `json:"env"`
	Config         json.RawMessage   `json:"config"`
}

// run handles one invocation and returns the process's exit status.
func run(c call) int {
	command := c.env("CNI_COMMAND")
	if command == "" {
		fmt.Fprintf(c.stdout, "allocnet-cni v%s\n", Version)
		return 0
	}
	if command == "VERSION" {
		// Read stdin all the same, as the reference plugins do: a runtime still writing it when
		// the plugin exits gets EPIPE (Go's exec ignores it; others fail the call).
		_, _ = io.Copy(io.Discard, io.LimitReader(c.stdin, 1<<20))
		return answer(c.stdout, map[string]interface{}{
			"cniVersion":        "1.0.0",
			"supportedVersions": supportedVersions,
		})
	}
	stdin, err := io.ReadAll(io.LimitReader(c.stdin, 1<<20+1))
	if err != nil {
		return fail(c.stdout, "", &cniError{Code: 5, Msg: "reading the network configuration from stdin failed", Details: err.Error()})
	}
	if len(stdin) > 1<<20 {
		return fail(c.stdout, "", &cniError{Code: 4, Msg: "the network configuration on stdin is over 1 MiB"})
	}
	var conf pluginConfig
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return fail(c.stdout, "", &cniError{Code: 6, Msg: "the network configuration on stdin is not JSON", Details: err.Error()})
	}
	socket := orDefault(conf.Socket, defaultSocket)
	queueDir := orDefault(conf.QueueDir, defaultQueueDir)
	readyTimeout := time.Duration(defaultReadyTimeoutMs) * time.Millisecond
	if conf.ReadyTimeoutMs != nil {
		if *conf.ReadyTimeoutMs < 0 {
			return fail(c.stdout, conf.CNIVersion, &cniError{Code: 7, Msg: fmt.Sprintf("readyTimeoutMs should be 0 or more, got %d", *conf.ReadyTimeoutMs)})
		}
		readyTimeout = time.Duration(*conf.ReadyTimeoutMs) * time.Millisecond
	}
	env := map[string]string{}
	for _, key := range envKeys {
		env[key] = c.env(key)
	}
	body, err := json.Marshal(request{Env: env, Config: stdin})
	if err != nil {
		return fail(c.stdout, conf.CNIVersion, &cniError{Code: 999, Msg: "encoding the request failed", Details: err.Error()})
	}
	agent := newAgent(socket)

	switch command {
	case "ADD":
		// Straight to the agent: a ready agent answers in one round trip. Only when it cannot be
		// reached, or answers 503 (not ready yet), does the ADD wait for /readyz and try again.
		status, result, err := agent.post(0, body)
		if err == nil && status != statusUnavailable {
			return printAnswer(c.stdout, status, result, conf.CNIVersion)
		}
		if err := agent.waitReady(readyTimeout); err != nil {
			return fail(c.stdout, conf.CNIVersion, unreachable(socket, err, fmt.Sprintf("not ready within %d ms", readyTimeout.Milliseconds())))
		}
		return agent.forward(body, c.stdout, conf.CNIVersion)
	case "DEL":
		attempt := c.delAttempt
		if attempt == 0 {
			attempt = delAttemptTimeout
		}
		status, result, err := agent.post(attempt, body)
		if err == nil && status != statusUnavailable {
			return printAnswer(c.stdout, status, result, conf.CNIVersion)
		}
		if err == nil {
			// Up but not serving yet (it answers 503 until its queue is replayed): queue it too.
			err = fmt.Errorf("the agent answered %d: %s", status, strings.TrimSpace(string(result)))
		}
		// The agent is down or did not answer in time: the DEL waits in the queue for its start.
		if qerr := enqueue(queueDir, env, conf.Name, stdin); qerr != nil {
			return fail(c.stdout, conf.CNIVersion, &cniError{
				Code:    11,
				Msg:     fmt.Sprintf("the allocnet agent at %q did not take the DEL, and queueing it in %q failed", socket, queueDir),
				Details: fmt.Sprintf("%v; %v", err, qerr),
			})
		}
		return 0
	case "STATUS":
		// A reachable agent answers itself: 50 while it is not ready.
		status, result, err := agent.post(0, body)
		if err != nil {
			return fail(c.stdout, conf.CNIVersion, &cniError{Code: 50, Msg: fmt.Sprintf("the allocnet agent at %q is not reachable", socket), Details: err.Error()})
		}
		return printAnswer(c.stdout, status, result, conf.CNIVersion)
	default: // CHECK, GC and anything newer: the agent decides (11 while not ready), or says it does not know it.
		return agent.forward(body, c.stdout, conf.CNIVersion)
	}
}

func unreachable(socket string, err error, what string) *cniError {
	return &cniError{Code: 11, Msg: fmt.Sprintf("the allocnet agent at %q is %s; try again later", socket, what), Details: err.Error()}
}

func orDefault(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}

// agent talks HTTP/1.1 to the agent's CNI server on its unix socket, one request a connection.
// The request is written and the answer read by hand rather than with net/http: linking
// net/http (its TLS and HTTP/2 included) cost ~0.4 ms of start-up in every exec (a VERSION run:
// 1.87 ms with it, 1.46 ms without), a seventh of the plugin's budget.
type agent struct {
	socket string
}

func newAgent(socket string) *agent {
	return &agent{socket: socket}
}

// roundTrip sends one request and returns the answer's status and body. `limit` bounds the
// whole exchange (0: no bound).
func (a *agent) roundTrip(method, path string, body []byte, limit time.Duration) (int, []byte, error) {
	d := net.Dialer{}
	if limit > 0 {
		d.Deadline = time.Now().Add(limit)
	}
	conn, err := d.Dial("unix", a.socket)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	if limit > 0 {
		_ = conn.SetDeadline(d.Deadline)
	}
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: allocnet\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", method, path, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return 0, nil, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "HTTP/1.") {
		return 0, nil, fmt.Errorf("not an HTTP answer: %q", strings.TrimSpace(line))
	}
	status, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0, nil, fmt.Errorf("not an HTTP status: %q", fields[1])
	}
	length, chunked := -1, false
	for {
		header, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, fmt.Errorf("reading the answer's headers: %w", err)
		}
		header = strings.TrimSpace(header)
		if header == "" {
			break
		}
		name, value, _ := strings.Cut(header, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length":
			length, _ = strconv.Atoi(strings.TrimSpace(value))
		case "transfer-encoding":
			// The agent always sends a length; the connection is closed after one answer.
			chunked = true
		}
	}
	if chunked {
		return 0, nil, errors.New("the answer is chunked; the allocnet agent sends a Content-Length")
	}
	var answer []byte
	if length >= 0 {
		answer = make([]byte, length)
		_, err = io.ReadFull(r, answer)
	} else {
		answer, err = io.ReadAll(r)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer's body: %w", err)
	}
	return status, answer, nil
}

// ready asks /readyz once.
func (a *agent) ready() error {
	status, _, err := a.roundTrip("GET", "/readyz", nil, time.Second)
	if err != nil {
		return err
	}
	if status != statusOK {
		return fmt.Errorf("/readyz answered %d", status)
	}
	return nil
}

// waitReady asks /readyz every 100 ms until it answers 200 or `limit` has passed.
func (a *agent) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := a.ready()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(readyPoll)
	}
}

// post sends the call to POST /v1/cni.
func (a *agent) post(limit time.Duration, body []byte) (int, []byte, error) {
	return a.roundTrip("POST", "/v1/cni", body, limit)
}

// forward posts the call and prints the agent's answer; the agent's own errors pass through.
func (a *agent) forward(body []byte, out io.Writer, version string) int {
	status, result, err := a.post(0, body)
	if err != nil {
		return fail(out, version, unreachable(a.socket, err, "unreachable"))
	}
	return printAnswer(out, status, result, version)
}

// printAnswer writes a 2xx answer as the result, anything else as the error it holds.
func printAnswer(out io.Writer, status int, result []byte, version string) int {
	if status >= 200 && status < 300 {
		if _, err := out.Write(result); err != nil {
			return 1
		}
		return 0
	}
	var e cniError
	if err := json.Unmarshal(result, &e); err != nil || e.Code == 0 {
		return fail(out, version, &cniError{Code: 999, Msg: fmt.Sprintf("the allocnet agent answered %d without a CNI error", status), Details: strings.TrimSpace(string(result))})
	}
	if _, err := out.Write(result); err != nil {
		return 1
	}
	return 1
}

func answer(out io.Writer, value interface{}) int {
	if err := json.NewEncoder(out).Encode(value); err != nil {
		return 1
	}
	return 0
}

// fail prints the spec's error object on stdout (where runtimes read it) and exits 1.
func fail(out io.Writer, version string, e *cniError) int {
	e.CNIVersion = orDefault(version, "1.0.0")
	_ = answer(out, e)
	return 1
}

// queueName is the file of one DEL: container id, ifname and network, hashed (they may hold any
// character), so that a repeated DEL of one attachment replaces the queued one.
func queueName(env map[string]string, network string) string {
	sum := sha256.Sum256([]byte(env["CNI_CONTAINERID"] + "\x00" + env["CNI_IFNAME"] + "\x00" + network))
	return hex.EncodeToString(sum[:]) + ".del"
}

// enqueue writes the DEL durably: a temporary file, fsynced, renamed into place, the directory
// fsynced, all under the shared lock (the agent's replay holds the exclusive one).
func enqueue(dir string, env map[string]string, network string, config []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil {
		return err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()

	data, err := json.Marshal(queued{QueuedAtUnixMs: time.Now().UnixMilli(), Env: env, Config: config})
	if err != nil {
		return err
	}
	name := queueName(env, network)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
