// Package observability shows franz-go's observability plugins on a
// kconsist factory: kprom (Prometheus metrics, one instance per client,
// labelled with the client's role) and kotel (OpenTelemetry traces and
// metrics, one instance for every client). See the Example and the test.
//
// It is a module of its own so that the SDK's module does not require the
// plugins and their Prometheus and OpenTelemetry libraries; .ci/run tests
// it with the rest.
package observability
