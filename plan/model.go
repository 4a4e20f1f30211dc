// Package plan is the layer where the world meets the pure core (SPECS.md
// §22): a plan is a content-addressed DAG of steps, each either a PEL run
// through the surface or an effect performed by a plan/effect Executor.
// Every attempt of an effect leaves a receipt artifact, and the ledger of
// typed events, each stored like an artifact, is the only truth about an
// execution: its state is a fold of its events, resume reads nothing else,
// and replay reads receipts and never calls.
package plan

import (
	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// The type tags of this package's artifacts, from the project's range
// (SPECS.md §19.9, "Type tags of this project").
const (
	TagPlan    asl.TypeTag = 0x80000002 // PLAN/1 (§22)
	TagReceipt asl.TypeTag = 0x80000003 // RECEIPT/1 (§22)
	TagEvent   asl.TypeTag = 0x80000004 // PLAN-EVENT/1 (§22)
)

// StepKind says what a step does.
type StepKind uint8

const (
	PELStep    StepKind = 1 // a surface run of a program by reference
	EffectStep StepKind = 2 // one effect, performed by an Executor
)

// Gate says whether an effect step waits for a person before its call.
type Gate uint8

const (
	GateNone     Gate = 1
	GateApproval Gate = 2
)

// CachePolicy says whether a successful receipt of the same effect kind and
// idempotency key, from any plan, answers a step without a call.
type CachePolicy uint8

const (
	CacheNone  CachePolicy = 1 // always call (still at most once per key and execution)
	CacheReuse CachePolicy = 2 // a successful receipt for (kind, key) is reused
)

// RetryPolicy bounds the attempts of an effect step. A failure of a final
// class is never retried; a retryable one waits a backoff derived from the
// key and the attempt number (so a schedule replays), doubling from
// BaseMillis up to CapMillis.
type RetryPolicy struct {
	MaxAttempts uint32 // >= 1; 1 means no retry
	BaseMillis  uint32
	CapMillis   uint32
}

// Binding is one named input of a step: either a stored artifact (Ref) or
// an output of an earlier step (Step and Output: a PEL step's output index
// in decimal, an effect's output name). Exactly one of the two forms is set.
type Binding struct {
	Name   string
	Ref    asl.Reference
	Step   string
	Output string
}

// Step is one node of a plan. ID is stable and unique within the plan;
// DependsOn lists steps that must succeed first (every step an input is
// bound to is an implicit dependency).
type Step struct {
	ID        string
	DependsOn []string
	Kind      StepKind
	Inputs    []Binding

	// PEL steps.
	Program   asl.Reference
	Params    asl.Reference // zero when the program takes none
	HasParams bool

	// Effect steps: every declaration is required (seed 004, "Plan
	// invariants"); a plan missing one is refused at build time.
	Effect       string // executor kind: "http", "exec", or a policy-named executor
	EffectParams []byte // canonical JSON, keys sorted
	Class        effect.Class
	Gate         Gate
	Retry        RetryPolicy
	Cache        CachePolicy
	KeyTemplate  string // empty: the key is derived from kind, params and input references
}

// Plan is a DAG of steps in ascending ID order (the canonical order of its
// encoding).
type Plan struct {
	Steps []Step
}
