package admin

// kadm.go delegates every kadm.Client method that takes a context; it is
// generated from the kadm version in go.mod, so run go generate after
// upgrading kadm (TestKadmGenerated fails until then).
//go:generate go run ./internal/gen -o kadm.go
