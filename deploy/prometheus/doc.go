// Package prometheus holds hactl's Prometheus alerting rules — hactl-scheduler.rules.yaml and
// hactl-operator.rules.yaml — and their promtool unit tests (<name>.rules_test.yaml); rules_test.go
// runs `promtool check rules` and `promtool test rules` on them under `go test` (no Go code besides
// this test).
package prometheus
