// Package scheme adds hactl-scheduler's plugin args to kube-scheduler's configuration scheme
// (k8s.io/kubernetes/pkg/scheduler/apis/config/scheme.Scheme), the one its config file loader decodes
// with. Import it (blank) in any binary that loads a KubeSchedulerConfiguration holding them.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubescheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/hactl/hactl/scheduler/apis/config"
	configv1 "github.com/hactl/hactl/scheduler/apis/config/v1"
)

func init() {
	// kubescheme built its Scheme in its own init, which Go ran before this one (it is imported
	// here); the types are added to it afterwards.
	utilruntime.Must(config.AddToScheme(kubescheme.Scheme))
	utilruntime.Must(configv1.AddToScheme(kubescheme.Scheme))
}
