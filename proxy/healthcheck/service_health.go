package healthcheck

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/proxy"
)

// ServiceHealthOptions configures a ServiceHealth.
type ServiceHealthOptions struct {
	// Addresses are the node-port addresses to listen on; empty means every
	// address of the node.
	Addresses []netip.Addr
	// Family, if set, restricts the listeners to one IP family ("tcp4" on
	// 0.0.0.0 or "tcp6" on ::, or the Addresses of that family; none of them
	// means no listener), so that a dual-stack node can run one ServiceHealth
	// per family with per-family endpoint counts, as kube-proxy does. Empty
	// serves both families from the same listeners.
	Family proxy.IPFamily
	// ProxyHealth decides serviceProxyHealthy; nil means always healthy.
	ProxyHealth *ProxyHealth
	// Listen opens the listeners; defaults to net.Listen. Tests, and callers
	// that must listen inside a network namespace, inject their own.
	Listen func(network, addr string) (net.Listener, error)
	// Logger defaults to klog.Background().
	Logger klog.Logger
}

// ServiceHealth serves the health-check node ports of externalTrafficPolicy
// Local LoadBalancer services, like kube-proxy's ServiceHealthServer: each
// port answers any request with the service's local endpoint count, 200 when
// there is at least one and the proxy is healthy, else 503, so load
// balancers send traffic only to nodes that can serve it locally. It is safe
// for concurrent use.
type ServiceHealth struct {
	listen      func(network, addr string) (net.Listener, error)
	binds       []bind
	proxyHealth *ProxyHealth
	log         klog.Logger

	mu       sync.RWMutex
	services map[types.NamespacedName]*hcPort
	counts   map[types.NamespacedName]int
	closed   bool
	// serving counts the Serve goroutines, so Close can wait for them.
	serving sync.WaitGroup
}

// bind is one address every health-check port listens on.
type bind struct {
	network string
	host    string // "" for every address
}

// hcPort is one service's open health-check port.
type hcPort struct {
	port    uint16
	servers []*http.Server
}

// NewServiceHealth returns a ServiceHealth serving no port yet.
func NewServiceHealth(opts ServiceHealthOptions) *ServiceHealth {
	if opts.Listen == nil {
		opts.Listen = net.Listen
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	return &ServiceHealth{
		listen:      opts.Listen,
		binds:       bindsFor(opts.Addresses, opts.Family),
		proxyHealth: opts.ProxyHealth,
		log:         opts.Logger.WithName("service-health"),
		services:    map[types.NamespacedName]*hcPort{},
		counts:      map[types.NamespacedName]int{},
	}
}

func bindsFor(addrs []netip.Addr, family proxy.IPFamily) []bind {
	if len(addrs) == 0 {
		switch family {
		case proxy.IPv4:
			return []bind{{"tcp4", "0.0.0.0"}}
		case proxy.IPv6:
			return []bind{{"tcp6", "::"}}
		default:
			return []bind{{"tcp", ""}}
		}
	}
	var out []bind
	for _, a := range addrs {
		a = a.Unmap()
		if family != "" && proxy.FamilyOf(a) != family {
			continue
		}
		network := "tcp6"
		if a.Is4() {
			network = "tcp4"
		}
		b := bind{network, a.String()}
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// SyncServices makes the open health-check ports exactly ports (service →
// port): it closes the ports of services no longer listed or whose port
// changed, opens the new ones and leaves the others untouched (no rebinding).
// A port that fails to open doesn't stop the others; the failures are
// returned joined, and the next SyncServices retries them.
func (s *ServiceHealth) SyncServices(ports map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("service health is closed")
	}

	for name, hc := range s.services {
		if port, ok := ports[name]; !ok || port != hc.port {
			s.log.V(2).Info("Closing health check node port", "service", name, "port", hc.port)
			hc.close()
			delete(s.services, name)
		}
	}

	var errs []error
	// Sorted so errors (and logs) come in a stable order.
	for _, name := range slices.SortedFunc(maps.Keys(ports), compareNames) {
		port := ports[name]
		if port == 0 || s.services[name] != nil {
			continue
		}
		hc, err := s.open(name, port)
		if err != nil {
			errs = append(errs, fmt.Errorf("health check node port %d of service %s: %w", port, name, err))
			continue
		}
		s.log.V(2).Info("Opened health check node port", "service", name, "port", port)
		s.services[name] = hc
	}
	return errors.Join(errs...)
}

func compareNames(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// open listens on port on every bind address; on failure it closes what it
// opened, so a retry (or another owner of the port) starts clean.
func (s *ServiceHealth) open(name types.NamespacedName, port uint16) (*hcPort, error) {
	hc := &hcPort{port: port}
	handler := s.serviceHandler(name)
	for _, b := range s.binds {
		ln, err := s.listen(b.network, net.JoinHostPort(b.host, strconv.Itoa(int(port))))
		if err != nil {
			hc.close()
			return nil, err
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: readHeaderTimeout}
		hc.servers = append(hc.servers, srv)
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error(err, "Health check node port stopped serving", "service", name, "address", ln.Addr().String())
			}
		}()
	}
	return hc, nil
}

func (hc *hcPort) close() {
	for _, srv := range hc.servers {
		// Close returns the listener's close error, which leaves nothing
		// for us to do: the port is released either way.
		_ = srv.Close()
	}
}

// SyncEndpoints sets each service's local endpoint count; services absent
// from counts have none.
func (s *ServiceHealth) SyncEndpoints(counts map[types.NamespacedName]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = maps.Clone(counts)
	if s.counts == nil {
		s.counts = map[types.NamespacedName]int{}
	}
	return nil
}

// Close closes every health-check port and waits for their servers to stop.
// SyncServices fails afterwards.
func (s *ServiceHealth) Close() {
	s.mu.Lock()
	for name, hc := range s.services {
		hc.close()
		delete(s.services, name)
	}
	s.closed = true
	s.mu.Unlock()
	s.serving.Wait()
}

// serviceBody is the JSON a health-check node port answers, laid out as
// kube-proxy's (tab-indented).
type serviceBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (s *ServiceHealth) serviceHandler(name types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.RLock()
		_, open := s.services[name]
		count := s.counts[name]
		s.mu.RUnlock()
		if !open {
			// A request that raced with closing the port: the service is
			// gone, so no endpoint here can serve it.
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		healthy := true
		if s.proxyHealth != nil {
			healthy, _ = s.proxyHealth.Health()
		}

		var body serviceBody
		body.Service.Namespace = name.Namespace
		body.Service.Name = name.Name
		body.LocalEndpoints = count
		body.ServiceProxyHealthy = healthy
		out, _ := json.MarshalIndent(body, "", "\t")

		setJSONHeaders(w)
		// Load balancers that weigh backends (e.g. Azure) read this.
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(out)
	})
}
