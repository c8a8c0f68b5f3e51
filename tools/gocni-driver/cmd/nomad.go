package main

// The calls Nomad's client makes through go-cni (client/allocrunner/networking_cni.go), reproduced
// over Debian's go-cni 1.1.7: what it passes to Setup and Remove, how it retries Setup, and which
// interface and address it takes from the result. Read for behaviour, written anew.

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	cni "github.com/containerd/go-cni"
)

// defaultLabels are the CNI args Nomad sends on ADD for an allocation of `nomad job init`'s
// example job (job "example", group "cache") in the default region and namespace. Nomad sends
// IgnoreUnknown as "true" (not "1"): libcni's bool accepts both.
func defaultLabels(allocID string) map[string]string {
	return map[string]string{
		"IgnoreUnknown":    "true",
		"NOMAD_REGION":     "global",
		"NOMAD_NAMESPACE":  "default",
		"NOMAD_JOB_ID":     "example",
		"NOMAD_GROUP_NAME": "cache",
		"NOMAD_ALLOC_ID":   allocID,
	}
}

// setupLabels is defaultLabels with the caller's labels on top. Nomad skips (with a warning) a
// value holding ";", which CNI_ARGS cannot carry; a driver that silently changed what it was
// asked to send would mislead a test, so this refuses it instead.
func setupLabels(allocID string, given map[string]string) (map[string]string, error) {
	labels := defaultLabels(allocID)
	for k, v := range given {
		if strings.ContainsAny(k, ";=") || strings.Contains(v, ";") {
			return nil, fmt.Errorf("label %q=%q cannot be carried in CNI_ARGS", k, v)
		}
		labels[k] = v
	}
	return labels, nil
}

// portMappings maps each [host, container] pair for tcp and then udp, as Nomad does for every
// allocated port (a container port below 1 means the host port). hostIP is Nomad's
// AllocatedPortMapping.HostIP: the host network's address, or "" with
// ignore_port_mapping_host_ip.
func portMappings(ports [][2]int, hostIP string) []cni.PortMapping {
	out := []cni.PortMapping{}
	for _, p := range ports {
		to := p[1]
		if to < 1 {
			to = p[0]
		}
		for _, proto := range []string{"tcp", "udp"} {
			out = append(out, cni.PortMapping{
				HostPort:      int32(p[0]),
				ContainerPort: int32(to),
				Protocol:      proto,
				HostIP:        hostIP,
			})
		}
	}
	return out
}

// attachment is what Nomad keeps of a Setup: AllocNetworkStatus's interface and address.
type attachment struct {
	Interface   string `json:"interface"`
	Address     string `json:"address"`
	AddressIPv6 string `json:"addressIPv6,omitempty"`
}

// pickAddress chooses as Nomad's cniToAllocNet does: interfaces sorted by name (go-cni returns a
// map); the first with a sandbox and an address, else the first with any address; the first IPv4
// and the first IPv6 of that interface.
func pickAddress(res *cni.Result) (attachment, error) {
	if len(res.Interfaces) == 0 {
		return attachment{}, fmt.Errorf("failed to configure network: no interfaces found")
	}
	names := make([]string, 0, len(res.Interfaces))
	for name := range res.Interfaces {
		names = append(names, name)
	}
	sort.Strings(names)
	pick := func(requireSandbox bool) (attachment, bool) {
		for _, name := range names {
			iface := res.Interfaces[name]
			if iface == nil || (requireSandbox && iface.Sandbox == "") {
				continue
			}
			a := attachment{Interface: name}
			for _, ipc := range iface.IPConfigs {
				if ipc.IP.To4() != nil && a.Address == "" {
					a.Address = ipc.IP.String()
				}
				if ipc.IP.To4() == nil && a.AddressIPv6 == "" {
					a.AddressIPv6 = ipc.IP.String()
				}
			}
			if a.Address != "" || a.AddressIPv6 != "" {
				if a.Address == "" {
					a.Address = a.AddressIPv6
				}
				return a, true
			}
		}
		return attachment{}, false
	}
	if a, ok := pick(true); ok {
		return a, nil
	}
	if a, ok := pick(false); ok {
		return a, nil
	}
	return attachment{}, fmt.Errorf("failed to configure network: no interface with an address")
}

// request is one Setup or Remove.
type request struct {
	ID     string
	Netns  string
	Ports  [][2]int
	HostIP string
	Labels map[string]string
}

// driver holds one go-cni instance for the process's life, as Nomad's client does.
type driver struct {
	cni      cni.CNI
	attempts int
	// sleep waits between Setup attempts: Nomad's 1 s plus up to 1 s of jitter.
	sleep func(attempt int)
}

// newDriver makes go-cni as Nomad does (plugin dirs, interface prefix "eth") and loads the
// configuration list file.
func newDriver(conflist string, pluginDirs []string, attempts int) (*driver, error) {
	c, err := cni.New(cni.WithPluginDir(pluginDirs), cni.WithInterfacePrefix("eth"))
	if err != nil {
		return nil, err
	}
	if err := c.Load(cni.WithConfListFile(conflist)); err != nil {
		return nil, err
	}
	return &driver{cni: c, attempts: attempts, sleep: jitterSleep}, nil
}

func jitterSleep(int) {
	time.Sleep(time.Second + time.Duration(time.Now().UnixNano()%1000)*time.Millisecond)
}

// setup is Nomad's Setup: port mappings and labels, up to d.attempts tries with no DEL between
// them; after the last failure the error is the first one's, as Nomad reports it.
func (d *driver) setup(ctx context.Context, r request) (attachment, error) {
	labels, err := setupLabels(r.ID, r.Labels)
	if err != nil {
		return attachment{}, err
	}
	ports := portMappings(r.Ports, r.HostIP)
	var first error
	for attempt := 1; ; attempt++ {
		res, err := d.cni.Setup(ctx, r.ID, r.Netns, cni.WithCapabilityPortMap(ports), cni.WithLabels(labels))
		if err == nil {
			return pickAddress(res)
		}
		if d.attempts <= 1 {
			return attachment{}, err
		}
		if attempt == 1 {
			first = err
		}
		if attempt >= d.attempts {
			return attachment{}, fmt.Errorf("failed to configure network: %v", first)
		}
		d.sleep(attempt)
	}
}

// remove is Nomad's Teardown without its iptables fallback: the port mappings, no labels.
func (d *driver) remove(ctx context.Context, r request) error {
	return d.cni.Remove(ctx, r.ID, r.Netns, cni.WithCapabilityPortMap(portMappings(r.Ports, r.HostIP)))
}

// parsePorts reads "H:C,H:C".
func parsePorts(s string) ([][2]int, error) {
	var out [][2]int
	for _, item := range splitList(s) {
		var h, c int
		if n, err := fmt.Sscanf(item, "%d:%d", &h, &c); err != nil || n != 2 ||
			fmt.Sprintf("%d:%d", h, c) != item || h < 1 || h > 65535 || c < 0 || c > 65535 {
			return nil, fmt.Errorf("port mapping %q is not HOST:CONTAINER", item)
		}
		out = append(out, [2]int{h, c})
	}
	return out, nil
}

// parseLabels reads "k=v,k=v".
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range splitList(s) {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not KEY=VALUE", item)
		}
		out[k] = v
	}
	return out, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// validHostIP accepts "" or an IP address.
func validHostIP(s string) error {
	if s != "" && net.ParseIP(s) == nil {
		return fmt.Errorf("host IP %q is not an IP address", s)
	}
	return nil
}
