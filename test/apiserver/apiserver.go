package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identity behind the bearer token.
const (
	AdminUser  = "admin"
	AdminGroup = "system:masters"
)

const (
	defaultServiceCIDR  = "10.96.0.0/12"
	defaultBindAddress  = "127.0.0.1"
	defaultReadyTimeout = 60 * time.Second
	// A port taken between our probe and the child's bind is retried.
	startAttempts = 3
)

// Options tune Start; the zero value works.
type Options struct {
	// KubeAPIServer and Etcd are binary paths; empty means
	// $NODENET_KUBE_APISERVER / $NODENET_ETCD, then the build cache.
	KubeAPIServer string
	Etcd          string
	// ServiceClusterIPRange is --service-cluster-ip-range; default
	// 10.96.0.0/12. Two ranges separated by a comma make it dual-stack.
	ServiceClusterIPRange string
	// ExtraAPIServerArgs are appended to kube-apiserver's flags; a repeated
	// flag overrides the default.
	ExtraAPIServerArgs []string
	// ReadyTimeout bounds each wait for readiness; default 60s.
	ReadyTimeout time.Duration
	// TempDir is where the server's private dir is made; default os.TempDir.
	TempDir string
	// BindAddress is the one address the apiserver listens on and
	// advertises, and the host of URL; default 127.0.0.1. Name a
	// non-loopback address (an underlay bridge's) when processes in other
	// network namespaces, such as flanneld in a test node, must reach it.
	// etcd stays on loopback either way.
	BindAddress string
	// ServiceAccountAdmission keeps the ServiceAccount admission plugin
	// on, for a cluster whose kube-controller-manager makes the service
	// accounts and their tokens (test/kubenode); off by default because no
	// controller does.
	ServiceAccountAdmission bool
}

func (o Options) withDefaults() Options {
	if o.ServiceClusterIPRange == "" {
		o.ServiceClusterIPRange = defaultServiceCIDR
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = defaultReadyTimeout
	}
	if o.BindAddress == "" {
		o.BindAddress = defaultBindAddress
	}
	return o
}

// validate rejects what kube-apiserver cannot advertise or a URL cannot
// name: the address must be one specific IP.
func (o Options) validate() error {
	a, err := netip.ParseAddr(o.BindAddress)
	if err != nil {
		return fmt.Errorf("bind address: %w", err)
	}
	if a.IsUnspecified() || a.Zone() != "" {
		return fmt.Errorf("bind address %s: want one specific address without a zone", a)
	}
	return nil
}

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	// URL is the apiserver's https address on Options.BindAddress.
	URL string
	// EtcdURL is etcd's client address on loopback.
	EtcdURL string
	// Dir holds etcd data, certificates, keys and the process logs
	// (etcd.log, kube-apiserver.log); Stop removes it.
	Dir string

	token     string
	caData    []byte
	client    kubernetes.Interface
	etcd      *process
	apiserver *process
	stopOnce  sync.Once

	// What StartAPIServer needs to run kube-apiserver again.
	bins     binaries
	opts     Options
	port     int
	restarts int
}

// Start runs etcd and kube-apiserver and returns once the apiserver is
// ready and the default namespace exists. ctx bounds startup only; the
// processes run until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	bins, err := findBinaries(opts)
	if err != nil {
		return nil, fmt.Errorf("%w; %s", err, BuildHint)
	}
	dir, err := os.MkdirTemp(opts.TempDir, "nodenet-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("make server dir: %w", err)
	}
	s := &Server{Dir: dir, bins: bins, opts: opts}
	if err := s.start(ctx, bins, opts); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bins binaries, opts Options) error {
	token, err := randomToken()
	if err != nil {
		return err
	}
	s.token = token
	if err := writeTokenFile(filepath.Join(s.Dir, "tokens.csv"), token); err != nil {
		return err
	}
	err = writeServiceAccountKeys(filepath.Join(s.Dir, "sa.key"), filepath.Join(s.Dir, "sa.pub"))
	if err != nil {
		return err
	}
	err = retryOnPortClash(func() (p *process, err error) {
		p, s.EtcdURL, err = startEtcd(ctx, bins.etcd, s.Dir, opts)
		s.etcd = p
		return p, err
	})
	if err != nil {
		return err
	}
	err = retryOnPortClash(func() (p *process, err error) {
		p, s.URL, err = s.startAPIServer(ctx, bins.kubeAPIServer, opts)
		s.apiserver = p
		return p, err
	})
	if err != nil {
		return err
	}
	return s.connect(ctx, opts)
}

// retryOnPortClash reruns start while its process lost a port race.
func retryOnPortClash(start func() (*process, error)) error {
	var err error
	for range startAttempts {
		var p *process
		p, err = start()
		if err == nil || p == nil || !p.portClash() {
			return err
		}
	}
	return err
}

func (s *Server) apiserverArgs(port int, opts Options) []string {
	args := []string{
		"--etcd-servers=" + s.EtcdURL,
		"--bind-address=" + opts.BindAddress,
		"--advertise-address=" + opts.BindAddress,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(s.Dir, "certs"),
		"--token-auth-file=" + filepath.Join(s.Dir, "tokens.csv"),
		"--anonymous-auth=false",
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(s.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(s.Dir, "sa.key"),
		"--service-cluster-ip-range=" + opts.ServiceClusterIPRange,
		// The reconciler would publish the bind address (loopback by
		// default, which 1.37 refuses and exits on) as the kubernetes
		// Service's endpoint, and no test needs that Service.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if !opts.ServiceAccountAdmission {
		// No controller-manager creates default service accounts.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	return append(args, opts.ExtraAPIServerArgs...)
}

func (s *Server) startAPIServer(ctx context.Context, bin string, opts Options) (*process, string, error) {
	ports, err := freePorts(opts.BindAddress, 1)
	if err != nil {
		return nil, "", err
	}
	s.port = ports[0]
	p, url, err := s.launchAPIServer(ctx, bin, opts, "kube-apiserver.log")
	return p, url, err
}

// launchAPIServer runs kube-apiserver on s.port and waits for /readyz.
func (s *Server) launchAPIServer(ctx context.Context, bin string, opts Options, logName string) (*process, string, error) {
	url := "https://" + net.JoinHostPort(opts.BindAddress, strconv.Itoa(s.port))
	p, err := startProcess("kube-apiserver", bin, s.apiserverArgs(s.port, opts),
		filepath.Join(s.Dir, logName))
	if err != nil {
		return nil, "", err
	}
	// The serving cert does not exist before the process makes it, so
	// readiness polling cannot verify it; it is our own child.
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	defer client.CloseIdleConnections()
	err = waitReady(ctx, p, opts.ReadyTimeout, func(ctx context.Context) error {
		return getOK(ctx, client, url+"/readyz", s.token)
	})
	if err != nil {
		p.stop()
		return p, "", err
	}
	return p, url, nil
}

// connect builds the verified client and waits for the default namespace,
// which a post-start hook creates shortly after /readyz turns green.
func (s *Server) connect(ctx context.Context, opts Options) error {
	ca, err := os.ReadFile(filepath.Join(s.Dir, "certs", "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("read apiserver self-signed certificate: %w", err)
	}
	s.caData = ca
	s.client, err = kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		return fmt.Errorf("make client: %w", err)
	}
	err = waitReady(ctx, s.apiserver, opts.ReadyTimeout, func(ctx context.Context) error {
		_, err := s.client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("wait for default namespace: %w", err)
	}
	return nil
}

// RESTConfig returns a fresh config for the admin identity; TLS is verified
// against the apiserver's self-signed certificate.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), s.caData...)},
		// Tests create objects in bursts; client-side throttling only
		// slows them down.
		QPS:   1000,
		Burst: 2000,
	}
}

// ServiceAccountKeyFile is the private key the apiserver signs service
// account tokens with, for kube-controller-manager's
// --service-account-private-key-file.
func (s *Server) ServiceAccountKeyFile() string { return filepath.Join(s.Dir, "sa.key") }

// CAFile is the apiserver's self-signed serving certificate, the CA that
// verifies it (kube-controller-manager's --root-ca-file).
func (s *Server) CAFile() string { return filepath.Join(s.Dir, "certs", "apiserver.crt") }

// Client returns a clientset for the admin identity.
func (s *Server) Client() kubernetes.Interface { return s.client }

// WriteKubeconfig writes a kubeconfig (mode 0600) for other processes such
// as agents, flanneld or kubectl.
func (s *Server) WriteKubeconfig(path string) error {
	const name = "nodenet"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.caData}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: s.token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: AdminUser}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// LogTail returns the last lines of both process logs, for failing tests.
func (s *Server) LogTail() string {
	var parts []string
	for _, p := range []*process{s.etcd, s.apiserver} {
		if p != nil {
			parts = append(parts, p.tail())
		}
	}
	return strings.Join(parts, "\n")
}

// Stop kills both processes and removes Dir; calling it again is a no-op.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		// The apiserver goes first so it does not log etcd errors while
		// dying.
		for _, p := range []*process{s.apiserver, s.etcd} {
			if p != nil {
				p.stop()
			}
		}
		_ = removeAll(s.Dir)
	})
}

// removeAll retries briefly: on Windows a just-killed process may still hold
// its files open.
func removeAll(dir string) error {
	var err error
	for range 10 {
		if err = os.RemoveAll(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}
