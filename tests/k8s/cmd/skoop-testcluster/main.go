// Command skoop-testcluster starts a real Kubernetes control plane on
// loopback for skoop's live-cluster tests: etcd in this process (through
// go.etcd.io/etcd/server/v3/embed) and the real kube-apiserver binary as a
// child process.
//
//	skoop-testcluster --dir DIR --bin BINDIR [--apiserver-arg=--flag=value ...]
//
// Protocol: once the API server answers /readyz with 200 and the "default"
// namespace exists, it prints exactly one line on stdout,
//
//	READY <absolute path of DIR/admin.kubeconfig> https://127.0.0.1:PORT
//
// and then runs until its stdin reaches EOF (or it gets SIGTERM, SIGINT or
// SIGHUP). It then stops kube-apiserver (SIGTERM, SIGKILL after 5 s), closes
// etcd and exits 0. Everything else it says goes to stderr. If it cannot
// start the cluster it exits 1 with the reason (and the tail of
// DIR/kube-apiserver.log) on stderr and prints no READY line.
//
// DIR must be new or empty. It ends up holding:
//
//	ca.crt ca.key                 the cluster CA (tests sign extra client certs with it)
//	apiserver.crt apiserver.key   kube-apiserver's serving cert
//	admin.crt admin.key           CN=skoop-admin, O=system:masters
//	sa.key sa.pub                 the service-account token signing key pair
//	admin.kubeconfig              context/cluster skoop-test, user skoop-admin, all data embedded
//	etcd/ etcd.log                etcd's data and log
//	kube-apiserver.log            the child's stdout and stderr
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

const (
	clusterName = "skoop-test"
	adminUser   = "skoop-admin"
	// The first address of --service-cluster-ip-range's first range is the
	// ClusterIP of the "kubernetes" Service, so the serving cert names it
	// too. The IPv6 range lets the lab's dual-stack Services be created.
	serviceCIDR      = "10.96.0.0/12,fd00:10:96::/108"
	kubernetesSvcIP  = "10.96.0.1"
	serviceAccountIs = "https://kubernetes.default.svc.cluster.local"
	stopGrace        = 5 * time.Second
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	log := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "skoop-testcluster: "+format+"\n", args...)
	}
	var (
		dir         = flag.String("dir", "", "a new or empty directory this run owns (required)")
		bin         = flag.String("bin", "", "directory holding the kube-apiserver binary (required)")
		timeout     = flag.Duration("timeout", 90*time.Second, "how long to wait for kube-apiserver to become ready")
		ignoreStdin = flag.Bool("ignore-stdin", false, "do not stop at EOF on stdin; run until SIGTERM/SIGINT")
		extraArgs   stringList
	)
	flag.Var(&extraArgs, "apiserver-arg", "extra kube-apiserver flag, --name=value (repeatable); replaces the launcher's own value for the same --name")
	flag.Parse()
	if *dir == "" || *bin == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: skoop-testcluster --dir DIR --bin BINDIR [--timeout 90s] [--ignore-stdin] [--apiserver-arg=--flag=value ...]")
		os.Exit(2)
	}

	// Stop on the first signal from here on; the cluster is torn down below
	// whatever state it reached.
	stop := make(chan string, 4)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		s := <-sigs
		stop <- "signal " + s.String()
	}()

	c := &cluster{log: log}
	err := c.start(*dir, *bin, *timeout, extraArgs, stop)
	if err != nil {
		log("%v", err)
		c.shutdown()
		os.Exit(1)
	}

	fmt.Fprintf(os.Stdout, "READY %s %s\n", c.kubeconfig, c.url)
	_ = os.Stdout.Sync() // os.Stdout is unbuffered; Sync fails harmlessly on pipes

	if !*ignoreStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop <- "EOF on stdin"
		}()
	}
	var why string
	select {
	case why = <-stop:
	case werr := <-c.apiserverExited:
		c.apiserverExited = nil
		log("kube-apiserver exited on its own (%v); tail of %s:\n%s", werr, c.apiserverLog, tail(c.apiserverLog, 40))
		c.shutdown()
		os.Exit(1)
	case eerr := <-c.etcd.Err():
		log("etcd failed: %v", eerr)
		c.shutdown()
		os.Exit(1)
	}
	log("stopping (%s)", why)
	c.shutdown()
	log("stopped")
}

type cluster struct {
	log func(string, ...any)

	dir          string
	etcd         *embed.Etcd
	apiserver    *os.Process
	apiserverLog string
	// apiserverExited receives cmd.Wait's result once the child is gone.
	apiserverExited chan error
	kubeconfig      string
	url             string
}

func (c *cluster) start(dir, bin string, timeout time.Duration, extraArgs []string, stop <-chan string) error {
	t0 := time.Now()
	var err error
	if c.dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	if entries, err := os.ReadDir(c.dir); err != nil {
		return err
	} else if len(entries) != 0 {
		return fmt.Errorf("--dir %s is not empty; give each run a fresh directory", c.dir)
	}
	apiserverBin, err := filepath.Abs(filepath.Join(bin, "kube-apiserver"))
	if err != nil {
		return err
	}
	if st, err := os.Stat(apiserverBin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("no executable kube-apiserver at %s (build it with tests/k8s/build.sh)", apiserverBin)
	}

	pki, err := writePKI(c.dir)
	if err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}

	etcdURL, err := c.startEtcd()
	if err != nil {
		return err
	}
	tEtcd := time.Since(t0)

	// A port chosen by listening on :0 and closing can be taken by someone
	// else before kube-apiserver binds it; retry with a fresh one if so.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.url = fmt.Sprintf("https://127.0.0.1:%d", port)
		args := apiserverArgs(c.dir, port, etcdURL, extraArgs)
		if err := c.startAPIServer(apiserverBin, args); err != nil {
			return err
		}
		err = c.waitReady(pki, timeout, stop)
		if err == nil {
			break
		}
		if errors.Is(err, errAddrInUse) && attempt < 3 {
			c.log("port %d was taken; retrying", port)
			c.stopAPIServer()
			continue
		}
		return err
	}

	c.kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.kubeconfig, c.url, pki); err != nil {
		return err
	}
	c.log("cluster ready in %.1fs (etcd %.1fs); API %s, logs in %s", time.Since(t0).Seconds(), tEtcd.Seconds(), c.url, c.dir)
	return nil
}

func (c *cluster) startEtcd() (string, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		clientPort, err := freePort()
		if err != nil {
			return "", err
		}
		peerPort, err := freePort()
		if err != nil {
			return "", err
		}
		clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
		peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}

		cfg := embed.NewConfig()
		cfg.Name = clusterName
		cfg.Dir = filepath.Join(c.dir, "etcd")
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.Logger = "zap"
		cfg.LogLevel = "warn"
		cfg.LogOutputs = []string{filepath.Join(c.dir, "etcd.log")}
		// Throwaway data: no fsync makes kube-apiserver's writes much faster.
		cfg.UnsafeNoFsync = true

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			_ = os.RemoveAll(cfg.Dir)
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			c.etcd = e
			return clientURL.String(), nil
		case err := <-e.Err():
			e.Close()
			return "", fmt.Errorf("etcd failed while starting: %w", err)
		case <-time.After(30 * time.Second):
			e.Close()
			return "", fmt.Errorf("etcd not ready after 30s; see %s", filepath.Join(c.dir, "etcd.log"))
		}
	}
	return "", fmt.Errorf("starting etcd: %w", lastErr)
}

// apiserverArgs is the kube-apiserver command line. An --apiserver-arg for a
// flag already here replaces it; others are appended.
func apiserverArgs(dir string, port int, etcdURL string, extra []string) []string {
	p := func(name string) string { return filepath.Join(dir, name) }
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--etcd-servers=" + etcdURL,
		"--client-ca-file=" + p("ca.crt"),
		"--tls-cert-file=" + p("apiserver.crt"),
		"--tls-private-key-file=" + p("apiserver.key"),
		"--service-account-issuer=" + serviceAccountIs,
		"--service-account-key-file=" + p("sa.pub"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + serviceCIDR,
		// The endpoint reconciler refuses a loopback advertise address
		// ("may not be in the loopback range"), and kube-apiserver exits.
		// With "none" the "kubernetes" Service exists (ClusterIP 10.96.0.1)
		// but gets no Endpoints/EndpointSlice.
		"--endpoint-reconciler-type=none",
		// Network tooling pods are often privileged; allow them.
		"--allow-privileged=true",
		// No kube-controller-manager runs by default, so nothing creates the
		// "default" ServiceAccount in each namespace, and the ServiceAccount
		// admission plugin would refuse every Pod. Turn only that plugin off
		// (override with --apiserver-arg=--disable-admission-plugins=).
		"--disable-admission-plugins=ServiceAccount",
		// Nothing else uses this directory; keep kube-apiserver from writing
		// to /var/run/kubernetes.
		"--cert-dir=" + p("apiserver-certs"),
		"--profiling=false",
	}
	for _, e := range extra {
		name, _, _ := strings.Cut(e, "=")
		replaced := false
		for i, a := range args {
			if n, _, _ := strings.Cut(a, "="); n == name {
				args[i] = e
				replaced = true
				break
			}
		}
		if !replaced {
			args = append(args, e)
		}
	}
	return args
}

func (c *cluster) startAPIServer(bin string, args []string) error {
	c.apiserverLog = filepath.Join(c.dir, "kube-apiserver.log")
	logf, err := os.OpenFile(c.apiserverLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "# %s %s\n", bin, strings.Join(args, " "))

	started := make(chan error, 1)
	c.apiserverExited = make(chan error, 1)
	exited := c.apiserverExited
	go func() {
		// Pdeathsig fires when the *thread* that forked the child exits,
		// not the process. Keep this goroutine on its own OS thread, alive
		// until the child is reaped, so that thread lives as long as the
		// child does, and the child dies with this process.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(bin, args...)
		cmd.Dir = c.dir
		cmd.Stdin = nil
		cmd.Stdout = logf
		cmd.Stderr = logf
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Pdeathsig: syscall.SIGKILL,
			// Its own process group: a terminal's Ctrl-C reaches only the
			// launcher, which then stops the child in order.
			Setpgid: true,
		}
		if err := cmd.Start(); err != nil {
			logf.Close()
			started <- fmt.Errorf("starting %s: %w", bin, err)
			return
		}
		c.apiserver = cmd.Process
		started <- nil
		err := cmd.Wait()
		logf.Close()
		exited <- err
	}()
	return <-started
}

var errAddrInUse = errors.New("address already in use")

// waitReady polls /readyz until it answers 200, then waits for the
// "default" namespace, which the API server creates just after.
func (c *cluster) waitReady(pki *pkiFiles, timeout time.Duration, stop <-chan string) error {
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{
				RootCAs:      pki.caPool,
				Certificates: []tls.Certificate{pki.admin},
			},
		},
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		for {
			resp, err := client.Get(c.url + path)
			if err == nil {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				last = fmt.Sprintf("%s answered %d: %s", path, resp.StatusCode, strings.TrimSpace(lastLines(string(body), 5)))
			} else {
				last = err.Error()
			}
			select {
			case werr := <-c.apiserverExited:
				c.apiserverExited = nil
				t := tail(c.apiserverLog, 40)
				if strings.Contains(t, "address already in use") {
					return errAddrInUse
				}
				return fmt.Errorf("kube-apiserver exited before it was ready (%v); tail of %s:\n%s", werr, c.apiserverLog, t)
			case why := <-stop:
				return fmt.Errorf("stopped (%s) before kube-apiserver was ready", why)
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("kube-apiserver not ready after %s (last: %s); tail of %s:\n%s", timeout, last, c.apiserverLog, tail(c.apiserverLog, 40))
			}
		}
	}
	return nil
}

// stopAPIServer sends SIGTERM, then SIGKILL after stopGrace, and waits for
// the child to be reaped.
func (c *cluster) stopAPIServer() {
	if c.apiserver == nil || c.apiserverExited == nil {
		return
	}
	_ = c.apiserver.Signal(syscall.SIGTERM)
	select {
	case <-c.apiserverExited:
	case <-time.After(stopGrace):
		c.log("kube-apiserver still running %s after SIGTERM; killing it", stopGrace)
		_ = c.apiserver.Kill()
		<-c.apiserverExited
	}
	c.apiserver = nil
	c.apiserverExited = nil
}

func (c *cluster) shutdown() {
	c.stopAPIServer()
	if c.etcd != nil {
		c.etcd.Close()
		c.etcd = nil
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return lastLines(string(b), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---- certificates ----

type pkiFiles struct {
	caPool       *x509.CertPool
	caPEM        []byte
	admin        tls.Certificate
	adminCertPEM []byte
	adminKeyPEM  []byte
}

type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func writePKI(dir string) (*pkiFiles, error) {
	now := time.Now()
	ca, err := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "skoop-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	if err != nil {
		return nil, err
	}
	serving, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP(kubernetesSvcIP)},
	}, ca)
	if err != nil {
		return nil, err
	}
	admin, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: adminUser, Organization: []string{"system:masters"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"ca.crt":        ca.certPEM,
		"ca.key":        ca.keyPEM,
		"apiserver.crt": serving.certPEM,
		"apiserver.key": serving.keyPEM,
		"admin.crt":     admin.certPEM,
		"admin.key":     admin.keyPEM,
		"sa.key":        saKeyPEM,
		"sa.pub":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	adminTLS, err := tls.X509KeyPair(admin.certPEM, admin.keyPEM)
	if err != nil {
		return nil, err
	}
	return &pkiFiles{
		caPool: pool, caPEM: ca.certPEM,
		admin: adminTLS, adminCertPEM: admin.certPEM, adminKeyPEM: admin.keyPEM,
	}, nil
}

// newCert makes an ECDSA P-256 key and a certificate for it from tmpl,
// signed by parent (self-signed if parent is nil).
func newCert(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  kp,
	}, nil
}

// keyPEM encodes a private key as PKCS#8 ("PRIVATE KEY"), which Go, openssl,
// curl and kube-apiserver all read.
func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeKubeconfig writes a kubeconfig with every credential embedded, so the
// file works wherever it is copied.
func writeKubeconfig(path, server string, pki *pkiFiles) error {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[4]s
  user:
    client-certificate-data: %[5]s
    client-key-data: %[6]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[4]s
    namespace: default
current-context: %[1]s
preferences: {}
`, clusterName, server, b64(pki.caPEM), adminUser, b64(pki.adminCertPEM), b64(pki.adminKeyPEM))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
