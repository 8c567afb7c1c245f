package specload

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm/images"
)

// Identity of the document spec.kubernetes.kubeletConfigurationFile must hold.
const (
	KubeletAPIVersion = "kubelet.config.k8s.io/v1beta1"
	KubeletKind       = "KubeletConfiguration"
)

// kubeletOwnedFields are the KubeletConfiguration fields hactl sets from the spec or wires up
// itself: a file setting them would make kubelet and containerd disagree (cgroupDriver) or break
// what hactl installed (containerd's socket, kubeadm's static pods).
var kubeletOwnedFields = map[string]string{
	"cgroupDriver":             "spec.kubernetes.runtime.cgroupDriver",
	"containerRuntimeEndpoint": "hactl's containerd (unix:///run/containerd/containerd.sock)",
	"staticPodPath":            "kubeadm's /etc/kubernetes/manifests",
}

// validateKubeLocalFiles checks what spec.kubernetes names on this machine: the local binaries
// (regular, executable), every image archive (readable, a docker save or OCI archive) and, together,
// that they hold every image of KubeImages; the kubelet configuration file (ReadKubeletConfiguration).
func validateKubeLocalFiles(c *v1alpha1.Cluster) field.ErrorList {
	k := c.Spec.Kubernetes
	if k == nil {
		return nil
	}
	kp := field.NewPath("spec", "kubernetes")
	var errs field.ErrorList
	for _, b := range []struct{ name, path string }{
		{"kubelet", k.Binaries.Kubelet}, {"kubeadm", k.Binaries.Kubeadm}, {"kubectl", k.Binaries.Kubectl},
	} {
		errs = append(errs, checkBinary(kp.Child("binaries", b.name), b.name, b.path)...)
	}
	if len(k.ImageArchives) > 0 {
		have := map[string]bool{}
		readable := true
		for i, a := range k.ImageArchives {
			if a == "" {
				continue
			}
			refs, err := images.ArchiveImages(a)
			if err != nil {
				readable = false
				msg := err.Error()
				if _, serr := os.Stat(a); serr != nil {
					msg = fileProblem(serr, "the image archive").Error()
				}
				errs = append(errs, field.Invalid(kp.Child("imageArchives").Index(i), a, msg))
				continue
			}
			for _, r := range refs {
				have[r] = true
			}
		}
		var missing []string
		for _, img := range k.KubeImages() {
			if !have[images.Normalize(img)] {
				missing = append(missing, img)
			}
		}
		if readable && len(missing) > 0 {
			hint := ""
			if slices.ContainsFunc(missing, func(s string) bool { return strings.Contains(s, "coredns") }) {
				hint = "; without a CoreDNS image set spec.kubernetes.coreDNS: false"
			}
			errs = append(errs, field.Invalid(kp.Child("imageArchives"), strings.Join(k.ImageArchives, ", "),
				fmt.Sprintf("the archives lack %s, which kubeadm %s needs (from imageRepository %s): add them (docker save IMAGE:TAG ...)%s",
					strings.Join(missing, ", "), k.Version, k.ImageRepository, hint)))
		}
	}
	if k.KubeletConfigurationFile != "" {
		if _, err := ReadKubeletConfiguration(c); err != nil {
			errs = append(errs, field.Invalid(kp.Child("kubeletConfigurationFile"), k.KubeletConfigurationFile, err.Error()))
		}
	}
	return errs
}

// checkBinary checks one local binary ("" = not set: nothing to check).
func checkBinary(p *field.Path, name, path string) field.ErrorList {
	if path == "" {
		return nil // required-ness is Validate's job
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(p, path, fileProblem(err, "the "+name+" binary").Error())}
	case !fi.Mode().IsRegular():
		return field.ErrorList{field.Invalid(p, path, "is not a regular file; point it at the "+name+" binary")}
	case fi.Mode().Perm()&0o111 == 0:
		return field.ErrorList{field.Invalid(p, path, fmt.Sprintf("is not executable; run: chmod +x %s", path))}
	}
	return nil
}

// ReadKubeletConfiguration reads spec.kubernetes.kubeletConfigurationFile: one YAML document of
// apiVersion KubeletAPIVersion, kind KubeletKind, strictly decoded against kubelet's own types
// (k8s.io/kubelet/config/v1beta1: an unknown or duplicated field is an error) and setting none of
// the fields hactl owns. It returns the document's fields as written (nil when no file is set), to
// be merged over hactl's configuration. Errors say what to fix; they never quote more of the file
// than a field name.
func ReadKubeletConfiguration(c *v1alpha1.Cluster) (map[string]any, error) {
	k := c.Spec.Kubernetes
	if k == nil || k.KubeletConfigurationFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(k.KubeletConfigurationFile)
	if err != nil {
		return nil, fileProblem(err, "the kubelet configuration")
	}
	if bytes.Contains(data, []byte("\n---")) || bytes.HasPrefix(data, []byte("---\n---")) {
		return nil, problemf("holds more than one YAML document: give only the %s document", KubeletKind)
	}
	// Strict and case-sensitive, as kubelet reads it (encoding/json would take "MaxPods" for
	// maxPods, which kubelet then ignores).
	js, err := yaml.YAMLToJSONStrict(data) // duplicate keys are errors
	if err != nil {
		return nil, problemf("is not valid YAML for a %s: %v", KubeletKind, err)
	}
	var typed kubeletv1beta1.KubeletConfiguration
	strict, err := sigsjson.UnmarshalStrict(js, &typed, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, problemf("is not a valid %s: %v", KubeletKind, err)
	}
	if len(strict) > 0 {
		var msgs []string
		for _, e := range strict {
			msgs = append(msgs, e.Error())
		}
		return nil, problemf("is not a valid %s (strict decoding against kubelet's types, names are case-sensitive): %s", KubeletKind, strings.Join(msgs, "; "))
	}
	if typed.APIVersion != KubeletAPIVersion || typed.Kind != KubeletKind {
		return nil, problemf("has apiVersion %q, kind %q: want apiVersion %s, kind %s", typed.APIVersion, typed.Kind, KubeletAPIVersion, KubeletKind)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, problemf("is not YAML: %v", err)
	}
	for f, owner := range kubeletOwnedFields {
		if _, ok := m[f]; ok {
			return nil, problemf("sets %s, which hactl sets (%s): remove it", f, owner)
		}
	}
	// Security by default: kubelet's API is not opened to anonymous or unauthorized callers.
	if typed.Authentication.Anonymous.Enabled != nil && *typed.Authentication.Anonymous.Enabled {
		return nil, problemf("sets authentication.anonymous.enabled: true: anyone reaching port 10250 could use kubelet's API; remove it")
	}
	if typed.Authorization.Mode == "AlwaysAllow" {
		return nil, problemf("sets authorization.mode: AlwaysAllow: every authenticated caller could exec into every pod of the node; remove it (kubeadm's Webhook mode asks the API server)")
	}
	return m, nil
}
