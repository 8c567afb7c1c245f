package v1alpha1

import _ "embed"

//go:embed example.yaml
var exampleSpec []byte

// ExampleSpec returns a fully commented example spec (3 etcd members in 3 zones), as `hactl init`
// writes it. It loads and validates; the local files it names (./bin/etcd, ~/.ssh/id_ed25519) are
// placeholders to edit. The caller gets its own copy.
func ExampleSpec() []byte { return append([]byte(nil), exampleSpec...) }
