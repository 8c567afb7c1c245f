// Package bindrecorder is the RecordingBinder bind plugin: it binds a pod exactly as DefaultBinder
// does, and puts the binding replica's identity on the Binding object, which the apiserver copies
// into the pod's annotations in the same write (pods/binding keeps a Binding's annotations). So every
// pod this scheduler placed names, atomically and without an extra API call, the replica that placed
// it: `hactl drill kill-leader --target lease/...` reads it to prove that two replicas never acted as
// leader at once (the windows of their bindings, in etcd revision order, never overlap).
package bindrecorder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"
)

// Name is the plugin's name in the registry and in KubeSchedulerConfiguration (it replaces
// DefaultBinder at the bind extension point).
const Name = "RecordingBinder"

// BoundByAnnotation is the pod annotation holding the binding replica's identity: its hostname (the
// node's name for a static pod on the host network, the pod's name in a Deployment; kube-scheduler's
// Lease holderIdentity starts with the same hostname and "_"), "_", and a random instance ID drawn
// when the process starts, so a restarted replica is a new identity.
const BoundByAnnotation = "scheduler.hactl.io/bound-by"

// RecordingBinder binds pods and records who bound them.
type RecordingBinder struct {
	handle   fwk.Handle
	identity string
}

var _ fwk.BindPlugin = &RecordingBinder{}

// New builds the plugin; it takes no args. It fails only when the hostname cannot be read.
func New(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("%s: hostname: %w", Name, err)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &RecordingBinder{handle: h, identity: host + "_" + hex.EncodeToString(id[:])}, nil
}

// Name returns Name.
func (b *RecordingBinder) Name() string { return Name }

// Identity is what the plugin writes into BoundByAnnotation.
func (b *RecordingBinder) Identity() string { return b.identity }

// Bind binds p to nodeName with the identity annotation, through the scheduler's API cacher when it
// has one (as DefaultBinder does), else directly.
func (b *RecordingBinder) Bind(ctx context.Context, _ fwk.CycleState, p *v1.Pod, nodeName string) *fwk.Status {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			Annotations: map[string]string{BoundByAnnotation: b.identity},
		},
		Target: v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if c := b.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err != nil {
			return fwk.AsStatus(err)
		}
		return fwk.AsStatus(c.WaitOnFinish(ctx, onFinish))
	}
	return fwk.AsStatus(util.BindPod(ctx, b.handle.ClientSet(), binding))
}
