package v1alpha1

import (
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

// zeroDefault says, for a field whose zero value means "use the default" to SetDefaults and for which
// 0 itself is not a valid setting, what the field accepts and the default that omitting it gives: a
// document that writes 0 there would otherwise get the default without a word. path is a field path
// with list indices written [*]; ok is false for every other field. Fields where 0 is meaningful
// (spec.loadBalancer.checkWeight) or is the tool's own default (spec.etcd.quotaBackendBytes: etcd
// reads 0 as its default quota) are not listed.
func zeroDefault(path string) (accepts string, def any, ok bool) {
	const port = "a TCP port between 1 and 65535"
	switch path {
	case "spec.ssh.port":
		return port, DefaultSSHPort, true
	case "spec.ssh.bastion.port":
		return port, DefaultBastionPort, true
	case "spec.ssh.connectTimeout":
		return "a positive duration", DefaultConnectTimeout, true
	case "spec.ssh.commandTimeout":
		return "a positive duration", DefaultCommandTimeout, true
	case "spec.ssh.maxParallel":
		return "at least 1", DefaultMaxParallel, true
	case "spec.hosts[*].port":
		return port, "that of spec.ssh.port", true
	case "spec.hosts[*].ssh.port":
		return port, "that of spec.hosts[*].port, else spec.ssh.port", true
	case "spec.etcd.spares[*].port":
		return port, "that of spec.ssh.port", true
	case "spec.loadBalancer.external.port":
		return port, DefaultExternalLBPort, true
	case "spec.etcd.clientPort":
		return port, DefaultClientPort, true
	case "spec.etcd.peerPort":
		return port, DefaultPeerPort, true
	case "spec.etcd.heartbeatInterval":
		return "a positive duration in whole milliseconds", DefaultHeartbeatInterval, true
	case "spec.etcd.electionTimeout":
		return fmt.Sprintf("a positive duration in whole milliseconds, at least %d x heartbeatInterval", limits.MinElectionHeartbeatRatio), DefaultElectionTimeout, true
	case "spec.loadBalancer.virtualRouterID":
		return fmt.Sprintf("between %d and %d (VRRP's virtual router ID, RFC 5798 §5.2.3)", limits.MinVirtualRouterID, limits.MaxVirtualRouterID), DefaultVirtualRouterID, true
	case "spec.loadBalancer.advertInterval":
		return fmt.Sprintf("whole seconds from %ds up to %ds (VRRPv2), or hundredths of a second from %v up to %v (VRRPv3: always for an IPv6 VIP, no auth)",
			limits.MinAdvertInterval/time.Second, limits.MaxAdvertIntervalV4/time.Second, limits.MinAdvertIntervalV3, limits.MaxAdvertIntervalV3), DefaultAdvertInterval, true
	case "spec.backup.deltaEvery":
		return fmt.Sprintf("whole seconds, at least %s", limits.MinDeltaEvery), DefaultDeltaEvery, true
	case "spec.loadBalancer.checkFall":
		return fmt.Sprintf("between 1 and %d", limits.MaxCheckFall), DefaultCheckFall, true
	case "spec.loadBalancer.frontendPort":
		return port, DefaultFrontendPort, true
	case "spec.loadBalancer.apiServerPort":
		return port, DefaultAPIServerPort, true
	case "spec.loadBalancer.healthCheck.interval":
		return "a positive duration", DefaultLBCheckInterval, true
	case "spec.loadBalancer.healthCheck.fall":
		return "at least 1", DefaultLBCheckFall, true
	case "spec.loadBalancer.healthCheck.rise":
		return "at least 1", DefaultLBCheckRise, true
	case "spec.scheduler.replicas":
		return "at least 1", DefaultSchedulerReplicas, true
	case "spec.scheduler.securePort":
		return port + " other than the control plane's components'", DefaultSchedulerSecurePort, true
	case "spec.scheduler.zonePreferenceWeight":
		return "a score weight of at least 1", DefaultZonePreferenceWeight, true
	case "spec.scheduler.leaderElection.leaseDuration", "spec.scheduler.leaderElection.renewDeadline", "spec.scheduler.leaderElection.retryPeriod":
		return "a positive duration (leaseDuration > renewDeadline > 1.2 x retryPeriod)", "15s / 10s / 2s", true
	case "spec.kubernetes.nodeCIDRMaskSize":
		return "a prefix length between podSubnet's and 30 (126 for IPv6)", DefaultNodeCIDRMaskSize, true
	}
	return "", nil, false
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// zeroField is a field the document set to 0 or a zero duration, with the value as written.
type zeroField struct {
	path    *field.Path
	written string
}

// explicitZeroErrors returns an error for every field in zeros that zeroDefault lists, naming the
// accepted values and the default that omitting the field gives.
func explicitZeroErrors(zeros []zeroField) field.ErrorList {
	var errs field.ErrorList
	for _, zf := range zeros {
		accepts, def, ok := zeroDefault(listIndex.ReplaceAllString(zf.path.String(), "[*]"))
		if !ok {
			continue
		}
		errs = append(errs, field.Invalid(zf.path, zf.written, fmt.Sprintf("must be %s; remove the field for the default (%v)", accepts, def)))
	}
	return errs
}
