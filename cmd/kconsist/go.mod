module github.com/kconsist/kconsist/cmd/kconsist

go 1.26.0

// The SDK of this repository. `go install ...@version` refuses a module
// with replace directives: at a release, require the SDK's tag vX.Y.Z below,
// drop this line and tag this module cmd/kconsist/vX.Y.Z (go.work keeps the
// repository's builds on the local SDK). README.md, Install, says how.
replace github.com/kconsist/kconsist => ../..

require (
	github.com/kconsist/kconsist v0.0.0-00010101000000-000000000000
	github.com/spf13/cobra v1.10.2
	github.com/stretchr/testify v1.11.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/sync v0.25.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
