// Package telemetry sets up OpenTelemetry tracing: an OTLP exporter configured by the standard
// OTEL_* variables when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, nothing otherwise (a no-op provider, and no instrumentation installed on the hot path).
// It also carries a trace across River: the trace context of the code that inserts a job is
// stored in the job's metadata and restored around the job's work.
package telemetry

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Enabled reports whether getenv configures an OTLP trace exporter.
func Enabled(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the tracer provider of the process: an SDK provider exporting over OTLP/HTTP
// when Enabled, nil otherwise (tracing off). shutdown flushes and stops it.
func Setup(ctx context.Context, getenv func(string) string, service string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !Enabled(getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		res = resource.Default()
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}

// Or returns tp, or a no-op provider when tp is nil.
func Or(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return noop.NewTracerProvider()
	}
	return tp
}

// Propagator is the W3C trace context propagator used across processes (HTTP headers, job
// metadata).
var Propagator = propagation.TraceContext{}

// metadataKey is the key of a job's metadata under which its inserter's trace context is kept.
const metadataKey = "otel"

// JobMiddleware stores the inserting code's trace context in each job's metadata and restores
// it around the job's work, so that the work's spans belong to the trace that enqueued it. Put
// it before River's otel middleware (rivercontrib/otelriver), so that middleware's work span is
// a child of the restored context.
type JobMiddleware struct {
	river.MiddlewareDefaults
}

// InsertMany adds the trace context of ctx to every job's metadata.
func (JobMiddleware) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return doInner(ctx)
	}
	for _, p := range params {
		meta := map[string]any{}
		if len(p.Metadata) > 0 {
			if err := json.Unmarshal(p.Metadata, &meta); err != nil {
				continue
			}
		}
		meta[metadataKey] = map[string]string(carrier)
		if raw, err := json.Marshal(meta); err == nil {
			p.Metadata = raw
		}
	}
	return doInner(ctx)
}

// Work restores the trace context stored in the job's metadata.
func (JobMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	var meta struct {
		Otel map[string]string `json:"otel"`
	}
	if len(job.Metadata) > 0 && json.Unmarshal(job.Metadata, &meta) == nil && len(meta.Otel) > 0 {
		ctx = Propagator.Extract(ctx, propagation.MapCarrier(meta.Otel))
	}
	return doInner(ctx)
}
