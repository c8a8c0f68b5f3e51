// Command gocni-driver calls CNI through containerd's go-cni exactly as Nomad's client does, so
// that tests and benchmarks can put allocnet under the client Nomad users run:
//
//	gocni-driver setup  --conflist F --plugin-dir D[,D] --id ID --netns PATH [--ports H:C,...] [--labels k=v,...] [--host-ip IP] [--attempts N]
//	gocni-driver remove --conflist F --plugin-dir D[,D] --id ID --netns PATH [--ports H:C,...] [--host-ip IP]
//	gocni-driver serve  --conflist F --plugin-dir D[,D] [--attempts N]
//
// setup and remove print one JSON answer line and exit 0, or print the error on stderr and exit 1
// (2 for a usage error). serve keeps one go-cni instance, as Nomad's long-lived client does: it
// reads one JSON request a line on stdin and answers each with one JSON line on stdout.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// answer is the JSON line printed for a call. Seq is the request's "seq", echoed as given.
type answer struct {
	Seq   json.RawMessage `json:"seq,omitempty"`
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	*attachment
	// Ms is the time of the go-cni call alone, in milliseconds.
	Ms float64 `json:"ms,omitempty"`
}

// serveRequest is one line of serve's input.
type serveRequest struct {
	Seq    json.RawMessage   `json:"seq"`
	Op     string            `json:"op"`
	ID     string            `json:"id"`
	Netns  string            `json:"netns"`
	Ports  [][2]int          `json:"ports"`
	HostIP string            `json:"hostIP"`
	Labels map[string]string `json:"labels"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: gocni-driver setup|remove|serve --conflist F --plugin-dir D[,D] ...")
		return 2
	}
	op := args[0]
	fs := flag.NewFlagSet("gocni-driver "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	conflist := fs.String("conflist", "", "the CNI configuration list file")
	pluginDirs := fs.String("plugin-dir", "", "plugin directories, comma-separated")
	attempts := fs.Int("attempts", 1, "Setup attempts (Nomad makes 3, 1-2 s apart)")
	var r request
	var ports, labels string
	if op == "setup" || op == "remove" {
		fs.StringVar(&r.ID, "id", "", "the container (allocation) id")
		fs.StringVar(&r.Netns, "netns", "", "the network namespace path")
		fs.StringVar(&ports, "ports", "", "port mappings HOST:CONTAINER, comma-separated; each maps tcp and udp")
		fs.StringVar(&r.HostIP, "host-ip", "", "the host IP of every port mapping")
		if op == "setup" {
			fs.StringVar(&labels, "labels", "", "CNI args KEY=VALUE, comma-separated, over Nomad's defaults")
		}
	} else if op != "serve" {
		fmt.Fprintf(stderr, "unknown command %q: want setup, remove or serve\n", op)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "gocni-driver %s: %v\n", op, err)
		return 2
	}
	if *conflist == "" || *pluginDirs == "" {
		return usage(errors.New("--conflist and --plugin-dir are required"))
	}
	if *attempts < 1 {
		return usage(errors.New("--attempts must be at least 1"))
	}
	d, err := newDriver(*conflist, splitList(*pluginDirs), *attempts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if op == "serve" {
		if err := serve(d, stdin, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if r.ID == "" || r.Netns == "" {
		return usage(errors.New("--id and --netns are required"))
	}
	if r.Ports, err = parsePorts(ports); err != nil {
		return usage(err)
	}
	if r.Labels, err = parseLabels(labels); err != nil {
		return usage(err)
	}
	if err := validHostIP(r.HostIP); err != nil {
		return usage(err)
	}
	a := d.call(context.Background(), op, r)
	if !a.OK {
		fmt.Fprintln(stderr, a.Error)
		return 1
	}
	return writeLine(stdout, a)
}

// call runs one setup or remove and times the go-cni call.
func (d *driver) call(ctx context.Context, op string, r request) answer {
	start := time.Now()
	var a answer
	var err error
	switch op {
	case "setup":
		var at attachment
		if at, err = d.setup(ctx, r); err == nil {
			a.attachment = &at
		}
	case "remove":
		err = d.remove(ctx, r)
	default:
		err = fmt.Errorf("unknown op %q: want setup or remove", op)
	}
	if err != nil {
		return answer{Error: err.Error()}
	}
	a.OK = true
	a.Ms = float64(time.Since(start).Microseconds()) / 1000
	return a
}

// serve answers each request line concurrently, one goroutine a line; the answers are written
// whole, one at a time, under out's lock, in the order the calls finish. At the end of the input
// it waits for the calls under way, so every request gets its answer before the process exits.
func serve(d *driver, in io.Reader, out io.Writer) error {
	var (
		mu sync.Mutex // guards out
		wg sync.WaitGroup
	)
	reply := func(a answer) {
		mu.Lock()
		defer mu.Unlock()
		writeLine(out, a)
	}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(line) == 0 {
			continue
		}
		var req serveRequest
		if err := json.Unmarshal(line, &req); err != nil {
			reply(answer{Seq: req.Seq, Error: fmt.Sprintf("bad request line: %v", err)})
			continue
		}
		r := request{ID: req.ID, Netns: req.Netns, Ports: req.Ports, HostIP: req.HostIP, Labels: req.Labels}
		if err := validRequest(r); err != nil {
			reply(answer{Seq: req.Seq, Error: err.Error()})
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := d.call(context.Background(), req.Op, r)
			a.Seq = req.Seq
			reply(a)
		}()
	}
	wg.Wait()
	return scanner.Err()
}

// validRequest checks what the command line's parsers check for setup and remove.
func validRequest(r request) error {
	if r.ID == "" || r.Netns == "" {
		return errors.New(`"id" and "netns" are required`)
	}
	for _, p := range r.Ports {
		if p[0] < 1 || p[0] > 65535 || p[1] < 0 || p[1] > 65535 {
			return fmt.Errorf("port mapping [%d,%d] is out of range", p[0], p[1])
		}
	}
	return validHostIP(r.HostIP)
}

func writeLine(w io.Writer, a answer) int {
	b, err := json.Marshal(a)
	if err != nil {
		// Only strings, numbers and raw JSON that already parsed: cannot fail.
		panic(err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return 1
	}
	return 0
}
