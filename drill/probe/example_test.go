package probe_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"time"

	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/provision"
)

// The shape of an LB failover drill: probe the VIP, watch every LB host, stop HAProxy on the
// holder, wait for the VIP to move and /readyz to answer again, then compute the figures.
// (Not run: it needs LB hosts.)
func Example_failoverDrill() {
	ctx := context.Background()
	var (
		clients  map[string]*provision.Client // one per LB host, connected
		kubeCA   *x509.CertPool
		vip      = netip.MustParseAddr("172.28.0.100")
		holder   = "lb-a" // from hactl status
		stopHAPx = "systemctl stop haproxy"
	)

	run, err := probe.StartReadyz(ctx, probe.ReadyzConfig{
		URL: "https://" + netip.AddrPortFrom(vip, 6443).String() + "/readyz",
		TLS: &tls.Config{RootCAs: kubeCA},
	})
	if err != nil {
		panic(err)
	}
	var watches []*probe.VIPWatch
	for name, c := range clients {
		watches = append(watches, probe.WatchVIP(ctx, name, c, vip, 0))
	}
	for _, w := range watches {
		<-w.Ready() // initial state known (or the watcher failed: see Err)
	}

	t0 := time.Now()
	if _, err := clients[holder].Run(ctx, "drill/stop", stopHAPx); err != nil {
		panic(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	to, at, err := probe.WaitMove(wctx, watches, holder, t0)
	if err != nil {
		panic(err)
	}
	for !probe.Outage(run.Samples(), t0).Recovered { // or a fixed observation window
		time.Sleep(100 * time.Millisecond)
	}

	samples := run.Stop()
	events := probe.Merge(watches...)
	for _, w := range watches {
		if _, err := w.Stop(); err != nil {
			panic(err) // a watcher died mid-drill: its host's events stop short
		}
	}
	st := probe.Outage(samples, t0)
	fmt.Printf("VIP on %s after %v (holders at the end: %v); /readyz back after %v\n",
		to, at.Sub(t0), probe.Holders(events, time.Now()), st.RecoveredAfter)
}
