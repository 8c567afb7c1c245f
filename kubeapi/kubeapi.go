// Package kubeapi gives hactl's commands one way to the Kubernetes API, whichever way the cluster is
// reached: through a kubeconfig (any cluster: kind in users' CI, a managed one), or, for the cluster
// hactl built, through SSH — kubeadm's admin kubeconfig read from the first control plane that
// answers (kept in memory, never written locally) and every connection dialled from that host, so
// the API need not be reachable from this machine (a bastion works too).
package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	// Via says how the API is reached: "kubeconfig PATH" or "ssh HOST".
	Via   string
	close func() error
}

// Close releases the SSH connection (nothing for a kubeconfig).
func (c *Client) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// FromKubeconfig builds a client from a kubeconfig file (its current context). Errors: the file
// missing or invalid (wrapped, naming the path).
func FromKubeconfig(path string) (*Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return newClient(cfg, "kubeconfig "+path, nil)
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
