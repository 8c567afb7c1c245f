package provision

import (
	"debug/elf"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// BinaryArch returns the `uname -m` name of the architecture the ELF binary at path is built for
// ("x86_64", "aarch64", ...; "" for a machine hactl does not know, which the host then decides).
// A file that is not an ELF binary (a macOS build, a script) is an error. Commands compare it with
// [Facts.Arch] before they upload a binary.
func BinaryArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "x86_64", nil
	case elf.EM_AARCH64:
		return "aarch64", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	}
	return "", nil
}

// goArchToUname maps GOARCH names (as release tarballs are named) to `uname -m`.
var goArchToUname = map[string]string{
	"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64",
}

// URLArch returns the `uname -m` architecture a tarball URL names in its file name
// ("etcd-v3.6.16-linux-arm64.tar.gz" → "aarch64"), or "" when it names none.
func URLArch(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	base := path.Base(u.Path)
	for goarch, uname := range goArchToUname {
		if strings.Contains(base, "-"+goarch+".") || strings.Contains(base, "-"+goarch+"-") || strings.Contains(base, "_"+goarch+".") {
			return uname
		}
	}
	return ""
}
