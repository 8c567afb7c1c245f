//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/e2e/harness"
)

// writer is the drills' writer (drill/workload, 50 writes/s, each acknowledged write recorded)
// running against the lab's members while a test changes the cluster.
type writer struct {
	t   *testing.T
	cli *clientv3.Client
	run *workload.Run
}

// startWriter starts the writer under /hactl-e2e/<name>/<time>/ on the cluster of labSpec(members),
// through the client URLs of its etcd hosts (the client balances over those that answer); it is
// stopped at the test's end at the latest.
func startWriter(t *testing.T, name string, members int) *writer {
	t.Helper()
	return startWriterOn(t, name, labSpec(t, members))
}

// startWriterOn is startWriter on the cluster of spec c (its etcd hosts, its state dir's client
// certificate).
func startWriterOn(t *testing.T, name string, c *v1alpha1.Cluster) *writer {
	t.Helper()
	var endpoints []string
	for _, h := range c.EtcdHosts() {
		endpoints = append(endpoints, suite.Endpoint(t, h.Name))
	}
	w := &writer{t: t, cli: harness.EtcdClient(t, c.Spec.StateDir, endpoints...)}
	run, err := workload.Start(context.Background(), workload.Config{Client: w.cli, Prefix: "/hactl-e2e/" + name + "/" + time.Now().UTC().Format("150405") + "/", Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	w.run = run
	t.Cleanup(func() {
		if w.run != nil {
			w.run.Stop()
		}
	})
	return w
}

// verify stops the writer and reads every acknowledged write back: the test fails when one is
// lost or a read was stale. It logs the count and the longest gap between acknowledged writes.
func (w *writer) verify(during string) workload.Stats {
	w.t.Helper()
	rec := w.run.Stop()
	w.run = nil
	v, err := workload.Verify(context.Background(), w.cli, rec)
	if err != nil {
		w.t.Fatal(err)
	}
	if !v.OK() {
		w.t.Errorf("acknowledged writes lost or stale reads %s: %+v", during, v)
	}
	st := rec.Stats(time.Time{})
	w.t.Logf("writer: %d acknowledged %s, longest write gap %s", st.Acked, during, st.LongestGap)
	return st
}
