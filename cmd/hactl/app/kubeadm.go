package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/ui"
)

type kubeadmConfigOptions struct {
	kubernetesVersion     string
	podSubnet             string
	serviceSubnet         string
	imagePullPolicy       string
	ignorePreflightErrors []string
	criSocket             string
	kubeletConfig         string
}

func newKubeadmConfigCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &kubeadmConfigOptions{}
	cmd := &cobra.Command{
		Use:   "kubeadm-config",
		Short: "Print kubeadm's configuration (v1beta4) for a control plane on hactl's etcd and load balancer",
		Long: fmt.Sprintf(`Prints kubeadm's configuration (API %s) for this cluster to stdout, two YAML
documents separated by "---":

  InitConfiguration     for 'kubeadm init' on the first control-plane host (in spec order): its
                        advertise address and apiserver port, node name, CRI socket
                        %s
  ClusterConfiguration  shared by every control-plane node:
                        controlPlaneEndpoint = the load balancer's VIP:frontendPort;
                        external etcd = hactl's members (client URLs), with
                          CA          %s
                          client cert %s
                          client key  %s
                        (hactl's etcd CA and apiserver-etcd-client certificate);
                        the pod and service subnets; the VIP and every control-plane host
                        address as extra apiserver certificate SANs

Reads only the spec: no host is contacted. Needs spec.loadBalancer and at least one host with role
control-plane (exit 2 naming the field otherwise). For a spec without spec.kubernetes: with it, hactl
bootstrap runs kubeadm itself (exit 2).

  hactl kubeadm-config -f cluster.yaml > kubeadm.yaml
  kubeadm config validate --config kubeadm.yaml
  kubeadm init --config kubeadm.yaml --upload-certs      # on the first control-plane host`,
			kubeadm.APIVersion, kubeadm.DefaultCRISocket, kubeadm.EtcdCAFile, kubeadm.EtcdClientCertFile, kubeadm.EtcdClientKeyFile),
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := ui.New(s.Err, g.verbose, false)
			c, err := loadSpec(g.file, p, false)
			if err != nil {
				return err
			}
			if c.Spec.Kubernetes != nil {
				return &UsageError{Err: fmt.Errorf("%s has spec.kubernetes: hactl bootstrap runs kubeadm itself with its own configuration; kubeadm-config is for a control plane you build with kubeadm (remove spec.kubernetes for that)", g.file)}
			}
			var kubelet []byte
			if o.kubeletConfig != "" {
				if kubelet, err = os.ReadFile(o.kubeletConfig); err != nil {
					return &kubeadm.OptionError{Flag: "--kubelet-config", Msg: fmt.Sprintf("%v: give a file holding a %s document", err, kubeadm.KubeletKind)}
				}
			}
			out, err := kubeadm.Config(c, kubeadm.Options{
				KubernetesVersion:     o.kubernetesVersion,
				PodSubnet:             o.podSubnet,
				ServiceSubnet:         o.serviceSubnet,
				ImagePullPolicy:       o.imagePullPolicy,
				IgnorePreflightErrors: splitList(o.ignorePreflightErrors),
				CRISocket:             o.criSocket,
				KubeletConfig:         kubelet,
				Source:                g.file,
			})
			if err != nil {
				return err
			}
			_, err = s.Out.Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubernetesVersion, "kubernetes-version", kubeadm.DefaultKubernetesVersion, "Kubernetes version (ClusterConfiguration.kubernetesVersion)")
	f.StringVar(&o.podSubnet, "pod-subnet", kubeadm.DefaultPodSubnet, "pod CIDR (networking.podSubnet); must not contain a host address or the VIP")
	f.StringVar(&o.serviceSubnet, "service-subnet", kubeadm.DefaultServiceSubnet, "service CIDR (networking.serviceSubnet); must not contain a host address or the VIP")
	f.StringVar(&o.imagePullPolicy, "image-pull-policy", "", "nodeRegistration.imagePullPolicy: Always, IfNotPresent or Never (default: kubeadm's, IfNotPresent)")
	f.StringSliceVar(&o.ignorePreflightErrors, "ignore-preflight-errors", nil, "kubeadm preflight checks to ignore (nodeRegistration.ignorePreflightErrors), e.g. Swap,SystemVerification or all")
	f.StringVar(&o.criSocket, "cri-socket", kubeadm.DefaultCRISocket, "nodeRegistration.criSocket")
	f.StringVar(&o.kubeletConfig, "kubelet-config", "", "file with a KubeletConfiguration document ("+kubeadm.KubeletAPIVersion+") to append: kubeadm stores it for every node's kubelet")
	return cmd
}
