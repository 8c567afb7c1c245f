package v1alpha1

import _ "embed" // JSONSchema

// JSONSchema is the Cluster document's JSON Schema (draft 2020-12; cluster.schema.json, generated
// from these types and their doc comments by `go run ./hack/schemagen`): shapes, types and
// descriptions for editors and `hactl explain`. It requires no field and holds no value rule:
// Validate is the authority.
//
//go:embed cluster.schema.json
var JSONSchema []byte
