package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	cni "github.com/containerd/go-cni"
)

// TestMain runs the tests in a mount namespace of their own with a tmpfs on /var/lib: libcni
// writes its result cache to /var/lib/cni and go-cni 1.1.7 cannot move it, so the tests would
// otherwise leave files on the host. unshare makes the namespace as root of a user namespace of
// its own, which needs no privilege.
func TestMain(m *testing.M) {
	const inside = "GOCNI_DRIVER_TEST_PRIVATE_MOUNTS"
	if os.Getenv(inside) != "1" {
		cmd := exec.Command("unshare", append([]string{"--map-root-user", "--mount", "--", os.Args[0]}, os.Args[1:]...)...)
		cmd.Env = append(os.Environ(), inside+"=1")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "running the tests under unshare: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// unshare --mount makes every mount private: this one is seen by nothing outside.
	if err := syscall.Mount("tmpfs", "/var/lib", "tmpfs", 0, "mode=0755"); err != nil {
		fmt.Fprintf(os.Stderr, "mounting a tmpfs on /var/lib: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// fakePlugin is a CNI plugin that records every call (its CNI_* env in <dir>/calls.log, its stdin
// in <dir>/<COMMAND>-<id>.json) and answers ADD with eth0 in the sandbox at 10.1.2.3, or fails
// while <dir>/fail-add exists.
const fakePlugin = `#!/bin/sh
dir=$(dirname "$0")
cat > "$dir/$CNI_COMMAND-$CNI_CONTAINERID.json"
echo "$CNI_COMMAND $CNI_CONTAINERID $CNI_NETNS $CNI_IFNAME $CNI_ARGS" >> "$dir/calls.log"
if [ "$CNI_COMMAND" = ADD ]; then
  if [ -e "$dir/fail-add" ]; then
    echo '{"cniVersion":"1.0.0","code":11,"msg":"try again","details":"bridge busy"}'
    exit 1
  fi
  echo '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"'"$CNI_NETNS"'"}],"ips":[{"address":"10.1.2.3/24","interface":0}]}'
fi
`

// fakeNetwork writes the fake plugin and a one-plugin conflist into a temp dir: (conflist, dir).
func fakeNetwork(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fake"), []byte(fakePlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	conflist := filepath.Join(dir, "fake.conflist")
	conf := `{"cniVersion":"1.0.0","name":"fakenet","plugins":[{"type":"fake","capabilities":{"portMappings":true}}]}`
	if err := os.WriteFile(conflist, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return conflist, dir
}

// call is one line of calls.log, CNI_ARGS sorted (go-cni builds them from a map: any order).
type call struct {
	Command, ID, Netns, IfName string
	Args                       []string
}

func calls(t *testing.T, dir string) []call {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, "calls.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []call
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		f := strings.SplitN(line, " ", 5)
		c := call{Command: f[0], ID: f[1], Netns: f[2], IfName: f[3]}
		if len(f) == 5 && f[4] != "" {
			c.Args = strings.Split(f[4], ";")
			sort.Strings(c.Args)
		}
		out = append(out, c)
	}
	return out
}

// runtimeConfig is the runtimeConfig the plugin got on stdin for command and id.
func runtimeConfig(t *testing.T, dir, command, id string) map[string]any {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, command+"-"+id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		RuntimeConfig map[string]any `json:"runtimeConfig"`
	}
	if err := json.Unmarshal(text, &conf); err != nil {
		t.Fatal(err)
	}
	return conf.RuntimeConfig
}

func runDriver(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// withoutMs drops the timing, the one field that changes from run to run.
func withoutMs(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not a JSON line: %q", line)
	}
	if ms, ok := m["ms"].(float64); !ok || ms <= 0 {
		t.Fatalf("no positive ms in %q", line)
	}
	delete(m, "ms")
	return m
}

func TestSetupAndRemoveCallThePluginAsNomadDoes(t *testing.T) {
	conflist, dir := fakeNetwork(t)
	base := []string{"--conflist", conflist, "--plugin-dir", "/nowhere," + dir, "--id", "alloc-1", "--netns", "/run/netns/n1", "--ports", "8080:80,9090:0"}

	code, out, errText := runDriver(t, "", append([]string{"setup"}, append(base, "--labels", "NOMAD_JOB_ID=web,custom=x")...)...)
	if code != 0 {
		t.Fatalf("setup: exit %d: %s", code, errText)
	}
	if got, want := withoutMs(t, out), map[string]any{"ok": true, "interface": "eth0", "address": "10.1.2.3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("setup printed %v, want %v", got, want)
	}
	code, out, errText = runDriver(t, "", append([]string{"remove"}, base...)...)
	if code != 0 {
		t.Fatalf("remove: exit %d: %s", code, errText)
	}
	if got, want := withoutMs(t, out), map[string]any{"ok": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("remove printed %v, want %v", got, want)
	}

	want := []call{
		{"ADD", "alloc-1", "/run/netns/n1", "eth0", []string{
			"IgnoreUnknown=true", "NOMAD_ALLOC_ID=alloc-1", "NOMAD_GROUP_NAME=cache",
			"NOMAD_JOB_ID=web", "NOMAD_NAMESPACE=default", "NOMAD_REGION=global", "custom=x",
		}},
		// Nomad passes no labels on DEL.
		{"DEL", "alloc-1", "/run/netns/n1", "eth0", nil},
	}
	if got := calls(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("calls\n got %v\nwant %v", got, want)
	}
	// Go field names: go-cni's PortMapping has no JSON tags.
	mappings := []any{
		map[string]any{"HostPort": 8080.0, "ContainerPort": 80.0, "Protocol": "tcp", "HostIP": ""},
		map[string]any{"HostPort": 8080.0, "ContainerPort": 80.0, "Protocol": "udp", "HostIP": ""},
		map[string]any{"HostPort": 9090.0, "ContainerPort": 9090.0, "Protocol": "tcp", "HostIP": ""},
		map[string]any{"HostPort": 9090.0, "ContainerPort": 9090.0, "Protocol": "udp", "HostIP": ""},
	}
	for _, command := range []string{"ADD", "DEL"} {
		want := map[string]any{"portMappings": mappings}
		if got := runtimeConfig(t, dir, command, "alloc-1"); !reflect.DeepEqual(got, want) {
			t.Errorf("%s runtimeConfig\n got %v\nwant %v", command, got, want)
		}
	}
}

func TestSetupFailsWithThePluginError(t *testing.T) {
	conflist, dir := fakeNetwork(t)
	if err := os.WriteFile(filepath.Join(dir, "fail-add"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errText := runDriver(t, "", "setup", "--conflist", conflist, "--plugin-dir", dir, "--id", "a", "--netns", "/n")
	if code != 1 || out != "" || errText != "plugin type=\"fake\" failed (add): try again; bridge busy\n" {
		t.Errorf("got exit %d, stdout %q, stderr %q", code, out, errText)
	}
}

func TestSetupRetriesAsNomadWithNoDelBetween(t *testing.T) {
	conflist, dir := fakeNetwork(t)
	if err := os.WriteFile(filepath.Join(dir, "fail-add"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := newDriver(conflist, []string{dir}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var slept []int
	d.sleep = func(attempt int) { slept = append(slept, attempt) }
	a := d.call(context.Background(), "setup", request{ID: "a", Netns: "/n"})
	if a.OK || a.Error != "failed to configure network: plugin type=\"fake\" failed (add): try again; bridge busy" {
		t.Errorf("answer %+v", a)
	}
	if !reflect.DeepEqual(slept, []int{1, 2}) {
		t.Errorf("slept after attempts %v, want [1 2]", slept)
	}
	var commands []string
	for _, c := range calls(t, dir) {
		commands = append(commands, c.Command)
	}
	if !reflect.DeepEqual(commands, []string{"ADD", "ADD", "ADD"}) {
		t.Errorf("commands %v", commands)
	}
}

func TestServeAnswersEveryLineWithItsSeq(t *testing.T) {
	conflist, dir := fakeNetwork(t)
	var in strings.Builder
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&in, `{"seq":%d,"op":"setup","id":"c%d","netns":"/run/netns/c%d","ports":[[%d,80]],"labels":{"NOMAD_JOB_ID":"j%d"}}`+"\n", i, i, i, 20000+i, i)
	}
	in.WriteString("not json\n")
	in.WriteString(`{"seq":"s","op":"setup","id":"","netns":"/n"}` + "\n")
	in.WriteString(`{"seq":"p","op":"setup","id":"x","netns":"/n","ports":[[0,80]]}` + "\n")
	in.WriteString(`{"seq":[1],"op":"check","id":"x","netns":"/n"}` + "\n")
	code, out, errText := runDriver(t, in.String(), "serve", "--conflist", conflist, "--plugin-dir", dir)
	if code != 0 {
		t.Fatalf("serve: exit %d: %s", code, errText)
	}
	answers := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		seq, _ := json.Marshal(m["seq"])
		delete(m, "seq")
		delete(m, "ms")
		answers[string(seq)] = m
	}
	want := map[string]map[string]any{
		"null": {"ok": false, "error": "bad request line: invalid character 'o' in literal null (expecting 'u')"},
		`"s"`:  {"ok": false, "error": `"id" and "netns" are required`},
		`"p"`:  {"ok": false, "error": "port mapping [0,80] is out of range"},
		"[1]":  {"ok": false, "error": `unknown op "check": want setup or remove`},
	}
	for i := 0; i < 8; i++ {
		want[fmt.Sprint(i)] = map[string]any{"ok": true, "interface": "eth0", "address": "10.1.2.3"}
	}
	if !reflect.DeepEqual(answers, want) {
		t.Errorf("answers\n got %v\nwant %v", answers, want)
	}
	if n := len(calls(t, dir)); n != 8 {
		t.Errorf("%d plugin calls, want 8", n)
	}
	if got := runtimeConfig(t, dir, "ADD", "c3")["portMappings"].([]any)[0]; !reflect.DeepEqual(got, map[string]any{"HostPort": 20003.0, "ContainerPort": 80.0, "Protocol": "tcp", "HostIP": ""}) {
		t.Errorf("c3's first mapping %v", got)
	}
}

func TestPickAddressAsNomad(t *testing.T) {
	ip := func(s string) *cni.IPConfig { return &cni.IPConfig{IP: net.ParseIP(s)} }
	for _, tc := range []struct {
		name  string
		ifs   map[string]*cni.Config
		want  attachment
		error string
	}{
		{"the sandbox interface", map[string]*cni.Config{
			"nomad": {IPConfigs: []*cni.IPConfig{ip("10.0.0.1")}},
			"eth0":  {Sandbox: "/n", IPConfigs: []*cni.IPConfig{ip("fd00::2"), ip("10.0.0.2"), ip("10.0.0.3")}},
		}, attachment{Interface: "eth0", Address: "10.0.0.2", AddressIPv6: "fd00::2"}, ""},
		{"sorted by name", map[string]*cni.Config{
			"eth1": {Sandbox: "/n", IPConfigs: []*cni.IPConfig{ip("10.0.1.2")}},
			"eth0": {Sandbox: "/n", IPConfigs: []*cni.IPConfig{ip("10.0.0.2")}},
		}, attachment{Interface: "eth0", Address: "10.0.0.2"}, ""},
		{"any interface when no sandbox has an address", map[string]*cni.Config{
			"eth0": {Sandbox: "/n"},
			"host": {IPConfigs: []*cni.IPConfig{ip("10.0.0.9")}},
		}, attachment{Interface: "host", Address: "10.0.0.9"}, ""},
		{"IPv6 only", map[string]*cni.Config{
			"eth0": {Sandbox: "/n", IPConfigs: []*cni.IPConfig{ip("fd00::2")}},
		}, attachment{Interface: "eth0", Address: "fd00::2", AddressIPv6: "fd00::2"}, ""},
		{"no address", map[string]*cni.Config{"eth0": {Sandbox: "/n"}}, attachment{}, "failed to configure network: no interface with an address"},
		{"no interface", map[string]*cni.Config{}, attachment{}, "failed to configure network: no interfaces found"},
	} {
		got, err := pickAddress(&cni.Result{Interfaces: tc.ifs})
		if tc.error != "" {
			if err == nil || err.Error() != tc.error {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.error)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	conflist, dir := fakeNetwork(t)
	common := []string{"--conflist", conflist, "--plugin-dir", dir}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"frob"}, "unknown command \"frob\": want setup, remove or serve\n"},
		{[]string{"setup"}, "gocni-driver setup: --conflist and --plugin-dir are required\n"},
		{append([]string{"setup"}, common...), "gocni-driver setup: --id and --netns are required\n"},
		{append([]string{"setup", "--id", "a", "--netns", "/n", "--ports", "80"}, common...), "gocni-driver setup: port mapping \"80\" is not HOST:CONTAINER\n"},
		{append([]string{"setup", "--id", "a", "--netns", "/n", "--ports", "8080:80x"}, common...), "gocni-driver setup: port mapping \"8080:80x\" is not HOST:CONTAINER\n"},
		{append([]string{"setup", "--id", "a", "--netns", "/n", "--labels", "a"}, common...), "gocni-driver setup: label \"a\" is not KEY=VALUE\n"},
		{append([]string{"remove", "--id", "a", "--netns", "/n", "--host-ip", "nope"}, common...), "gocni-driver remove: host IP \"nope\" is not an IP address\n"},
		{append([]string{"serve", "--attempts", "0"}, common...), "gocni-driver serve: --attempts must be at least 1\n"},
	} {
		code, out, errText := runDriver(t, "", tc.args...)
		if code != 2 || out != "" || errText != tc.stderr {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errText, tc.stderr)
		}
	}
	code, _, errText := runDriver(t, "", "setup", "--conflist", conflist, "--plugin-dir", dir, "--id", "a", "--netns", "/n", "--labels", "k=a;b")
	if code != 1 || errText != "label \"k\"=\"a;b\" cannot be carried in CNI_ARGS\n" {
		t.Errorf("a label with ';': exit %d, stderr %q", code, errText)
	}
}
