package v1alpha1

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// zeroDefaulted lists the fields whose zero value means "use the default" to SetDefaults, and for
// which 0 itself is not a valid setting: a document that writes 0 there would otherwise get the
// default without a word. Keys are field paths with list indices written [*]; values say what the
// field accepts. Fields where 0 is meaningful (spec.loadBalancer.checkWeight) or is the tool's own
// default (spec.etcd.quotaBackendBytes: etcd reads 0 as its default quota) are not listed.
var zeroDefaulted = map[string]struct {
	accepts string
	def     any
}{
	"spec.ssh.port":                          {"a TCP port between 1 and 65535", DefaultSSHPort},
	"spec.ssh.bastion.port":                  {"a TCP port between 1 and 65535", DefaultBastionPort},
	"spec.ssh.connectTimeout":                {"a positive duration", DefaultConnectTimeout},
	"spec.ssh.commandTimeout":                {"a positive duration", DefaultCommandTimeout},
	"spec.ssh.maxParallel":                   {"at least 1", DefaultMaxParallel},
	"spec.hosts[*].port":                     {"a TCP port between 1 and 65535", "that of spec.ssh.port"},
	"spec.etcd.clientPort":                   {"a TCP port between 1 and 65535", DefaultClientPort},
	"spec.etcd.peerPort":                     {"a TCP port between 1 and 65535", DefaultPeerPort},
	"spec.etcd.heartbeatInterval":            {"a positive duration in whole milliseconds", DefaultHeartbeatInterval},
	"spec.etcd.electionTimeout":              {"a positive duration in whole milliseconds, at least 5 x heartbeatInterval", DefaultElectionTimeout},
	"spec.loadBalancer.virtualRouterID":      {fmt.Sprintf("between 1 and %d (VRRP's virtual router ID, RFC 5798 §5.2.3)", MaxVirtualRouterID), DefaultVirtualRouterID},
	"spec.loadBalancer.advertInterval":       {"whole seconds from 1s (up to 255s for an IPv4 VIP, 40s for IPv6)", DefaultAdvertInterval},
	"spec.loadBalancer.frontendPort":         {"a TCP port between 1 and 65535", DefaultFrontendPort},
	"spec.loadBalancer.apiServerPort":        {"a TCP port between 1 and 65535", DefaultAPIServerPort},
	"spec.loadBalancer.healthCheck.interval": {"a positive duration", DefaultLBCheckInterval},
	"spec.loadBalancer.healthCheck.fall":     {"at least 1", DefaultLBCheckFall},
	"spec.loadBalancer.healthCheck.rise":     {"at least 1", DefaultLBCheckRise},
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// zeroField is a field the document set to 0 or a zero duration, with the value as written.
type zeroField struct {
	path    *field.Path
	written string
}

// explicitZeroErrors returns an error for every field in zeros that zeroDefaulted lists, naming
// the accepted values and the default that omitting the field gives.
func explicitZeroErrors(zeros []zeroField) field.ErrorList {
	var errs field.ErrorList
	for _, zf := range zeros {
		z, ok := zeroDefaulted[listIndex.ReplaceAllString(zf.path.String(), "[*]")]
		if !ok {
			continue
		}
		errs = append(errs, field.Invalid(zf.path, zf.written, fmt.Sprintf("must be %s; remove the field for the default (%v)", z.accepts, z.def)))
	}
	return errs
}
