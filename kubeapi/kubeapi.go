// Package kubeapi gives hactl's commands one way to the Kubernetes API, whichever way the cluster is
// reached: through a kubeconfig (any cluster: kind in users' CI, a managed one), or, for the cluster
// hactl built, through SSH — kubeadm's admin kubeconfig read from the first control plane that
// answers (kept in memory, never written locally) and every connection dialled from that host, so
// the API need not be reachable from this machine (a bastion works too).
package kubeapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/provision"
)

// AdminConf is kubeadm's admin kubeconfig on a control-plane host.
const AdminConf = "/etc/kubernetes/admin.conf"

// Client is a clientset with what it needs closed after use.
type Client struct {
	kubernetes.Interface
	Config *rest.Config
	// Via says how the API is reached: "kubeconfig PATH (context C, server URL)" or "ssh HOST".
	Via string
	// Context and Server are the kubeconfig's context and its server URL ("" over SSH).
	Context, Server string
	close           func() error
}

// Close releases the SSH connection (nothing for a kubeconfig).
func (c *Client) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// Kubeconfig names a kubeconfig file and the context in it hactl uses (--kubeconfig, --context).
type Kubeconfig struct {
	Path string
	// Context is a context of the file; "" is its current-context.
	Context string
}

// LoadError is a kubeconfig file that cannot be read or parsed, or that defines no usable cluster
// for its context: bad input found before anything is contacted.
type LoadError struct {
	Path string
	Err  error
}

func (e *LoadError) Error() string { return fmt.Sprintf("kubeconfig %s: %v", e.Path, e.Err) }
func (e *LoadError) Unwrap() error { return e.Err }

// ContextError is a context that the kubeconfig does not define (--context, or a current-context
// naming none). Have lists the contexts it does define, sorted.
type ContextError struct {
	Path, Context string
	Have          []string
	// Current: Context is the file's current-context (no --context given).
	Current bool
}

func (e *ContextError) Error() string {
	if e.Context == "" {
		return fmt.Sprintf("kubeconfig %s: no current-context: pick one of its contexts with --context (%s)", e.Path, orNone(e.Have))
	}
	what := "context"
	if e.Current {
		what = "its current-context"
	}
	return fmt.Sprintf("kubeconfig %s: %s %q does not exist; its contexts: %s", e.Path, what, e.Context, orNone(e.Have))
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// UnreachableError is a version request to the API server that failed (within PingTimeout):
// no answer, or, with Answered, an error status (credentials refused, 403, 5xx).
type UnreachableError struct {
	Path, Context, Server string
	Answered              bool
	Err                   error
}

func (e *UnreachableError) Error() string {
	if e.Answered {
		return fmt.Sprintf("kubeconfig %s, context %q: the API server %s answered the version request with an error (check the context's user and its credentials): %v", e.Path, e.Context, e.Server, e.Err)
	}
	return fmt.Sprintf("kubeconfig %s, context %q: the API server %s does not answer: %v", e.Path, e.Context, e.Server, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// PingTimeout bounds the version request FromKubeconfig makes to check that the server answers.
const PingTimeout = 15 * time.Second

// LoadKubeconfig builds a client from kc without contacting the server: the file read (KUBECONFIG's
// merging rules do not apply: the one file), kc.Context or else its current-context picked.
// Errors: *LoadError (the file), *ContextError (no such context). Client.Via names the file, the
// context and the server, so errors wrapped with it say which cluster was meant.
func LoadKubeconfig(kc Kubeconfig) (*Client, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kc.Path}, &clientcmd.ConfigOverrides{CurrentContext: kc.Context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, &LoadError{Path: kc.Path, Err: err}
	}
	if len(raw.Contexts) == 0 {
		return nil, &LoadError{Path: kc.Path, Err: errors.New("the file defines no context")}
	}
	name := cmp.Or(kc.Context, raw.CurrentContext)
	ctx, ok := raw.Contexts[name]
	if !ok || name == "" {
		return nil, &ContextError{Path: kc.Path, Context: name, Have: slices.Sorted(maps.Keys(raw.Contexts)), Current: kc.Context == ""}
	}
	if _, ok := raw.Clusters[ctx.Cluster]; !ok {
		return nil, &LoadError{Path: kc.Path, Err: fmt.Errorf("context %q names cluster %q, which the file does not define", name, ctx.Cluster)}
	}
	if _, ok := raw.AuthInfos[ctx.AuthInfo]; ctx.AuthInfo != "" && !ok {
		return nil, &LoadError{Path: kc.Path, Err: fmt.Errorf("context %q names user %q, which the file does not define", name, ctx.AuthInfo)}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, &LoadError{Path: kc.Path, Err: fmt.Errorf("context %q: %w", name, err)}
	}
	server := redactURL(cfg.Host)
	cli, err := newClient(cfg, fmt.Sprintf("kubeconfig %s (context %q, server %s)", kc.Path, name, server), nil)
	if err != nil {
		return nil, &LoadError{Path: kc.Path, Err: err}
	}
	cli.Context, cli.Server = name, server
	return cli, nil
}

// redactURL is a server URL fit for messages: a password in it replaced by "xxxxx", its query
// (where a token may ride) dropped.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a server URL that does not parse)"
	}
	u.RawQuery, u.ForceQuery = "", false
	return u.Redacted()
}

// FromKubeconfig is LoadKubeconfig, then a version request (bounded by PingTimeout) so that a
// server that does not answer is named at once. Errors: LoadKubeconfig's, *UnreachableError.
func FromKubeconfig(ctx context.Context, kc Kubeconfig) (*Client, error) {
	cli, err := LoadKubeconfig(kc)
	if err != nil {
		return nil, err
	}
	if err := cli.Ping(ctx); err != nil {
		var se apierrors.APIStatus
		return nil, &UnreachableError{Path: kc.Path, Context: cli.Context, Server: cli.Server, Answered: errors.As(err, &se), Err: err}
	}
	return cli, nil
}

// Ping asks the server for its version, within PingTimeout.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	return c.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
}

// Wrap names the cluster (Via) in err; nil stays nil.
func (c *Client) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", c.Via, err)
}

// FromSpec builds a client for the cluster of c through SSH: the first control-plane host (spec
// order) whose admin kubeconfig can be read. Errors: per host, why not (aggregated).
func FromSpec(ctx context.Context, c *v1alpha1.Cluster, prompt provision.Prompter) (*Client, error) {
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	var errs []error
	for _, h := range c.ControlPlaneHosts() {
		cli, err := d.Dial(ctx, provision.TargetOf(h))
		if err != nil {
			errs = append(errs, &provision.HostError{Host: h.Name, Err: err})
			continue
		}
		res, err := cli.Run(ctx, "kubeapi", "cat "+AdminConf)
		if err != nil {
			cli.Close()
			errs = append(errs, &provision.HostError{Host: h.Name, Err: err})
			continue
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(res.Stdout)
		if err != nil {
			cli.Close()
			errs = append(errs, &provision.HostError{Host: h.Name, Err: fmt.Errorf("%s: %w", AdminConf, err)})
			continue
		}
		cfg.Dial = func(ctx context.Context, _, addr string) (net.Conn, error) { return cli.DialContext(ctx, addr) }
		return newClient(cfg, "ssh "+h.Name, func() error { return errors.Join(cli.Close(), d.Close()) })
	}
	d.Close()
	if len(errs) == 0 {
		return nil, errors.New("the spec has no control-plane host")
	}
	return nil, errors.Join(errs...)
}

func newClient(cfg *rest.Config, via string, closeFn func() error) (*Client, error) {
	cfg.UserAgent = "hactl"
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		if closeFn != nil {
			closeFn()
		}
		return nil, fmt.Errorf("%s: %w", via, err)
	}
	return &Client{Interface: cs, Config: cfg, Via: via, close: closeFn}, nil
}

// PodWarning is the newest Warning event of pod name in namespace as "REASON: MESSAGE"
// (FailedCreatePodSandBox, FailedMount, BackOff …: what a pod in ContainerCreating or a crash loop
// waits on), or "" when it has none or the events cannot be listed. Newest by lastTimestamp, else
// eventTime, else creation.
func PodWarning(ctx context.Context, cs kubernetes.Interface, namespace, name string) string {
	evs, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + name + ",type=Warning",
	})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	at := func(e corev1.Event) time.Time {
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	newest := evs.Items[0]
	for _, e := range evs.Items[1:] {
		if at(e).After(at(newest)) {
			newest = e
		}
	}
	return newest.Reason + ": " + strings.TrimSpace(newest.Message)
}
