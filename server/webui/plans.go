package webui

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
)

// The plan pages (SPECS.md §18.7, "The pages"; the executions of §24):
// plans/ lists the executions of the store as `amduat plan ls` does, and
// plans/ID shows one execution: its steps drawn as a graph coloured by
// state, each step's attempts, receipts, outputs and reason code, its
// events, and, for a step waiting for approval, the approve and reject
// forms. Everything shown is the fold plan.Runner.Status gives; the forms
// post to the server (Options.PlanForm), which records the decision
// through plan.Runner.Approve or Reject. This file holds no plan logic.

const (
	// MaxPlanRows bounds the executions listed on the plans page.
	MaxPlanRows = 200
	// MaxPlanEvents bounds the events listed on an execution page (the
	// newest are kept).
	MaxPlanEvents = 500
	// MaxStepReceipts bounds the receipts shown per step (the newest are
	// kept).
	MaxStepReceipts = 50
)

// Layout of a plan's graph, in SVG user units; the boxes and edges use the
// program DAG's classes and template (dag.go).
const (
	planBoxH    = 64
	planIDRunes = 24
)

type planRow struct {
	ID      refView
	Href    string
	Plan    *refView
	Mode    string
	Status  string
	Class   string
	Steps   string // counts by state, e.g. "2 succeeded · 1 waiting_approval"
	Blocked string
}

type plansPage struct {
	page
	Rows    []planRow
	Omitted int
	Note    string
}

type stepReceipt struct {
	Ref  refView
	What string // "attempt 1 succeeded", "approval by alice", "result"
}

type stepRow struct {
	ID       string
	Anchor   string
	What     string // "pel PROGRAM" or "http · external_send · gate approval"
	Program  *refView
	State    string
	Class    string
	Attempts uint32
	Reason   string
	ErrClass string
	Decision string
	Receipts []stepReceipt
	Omitted  int
	Outputs  []namedRef
	Waiting  bool
}

type namedRef struct {
	Name string
	Ref  refView
}

type eventRow struct {
	Seq     uint64
	Type    string
	Step    string
	Attempt uint32
	Reason  string
	Actor   string
	Time    string
	Ref     refView
}

type execPage struct {
	page
	ID        refView
	Status    string
	Class     string
	Plan      refView
	Mode      string
	Label     string
	Inputs    []namedRef
	Head      refView
	Seq       uint64
	Blocked   []plan.Blocker
	DAG       *dagView
	DAGNote   string
	Steps     []stepRow
	Events    []eventRow
	Omitted   int
	CSRF      string // the decision forms' token; empty: no forms
	DecideURL string
}

// plansURL is the page of execution id, or the list for the zero reference.
func (h *handler) plansURL(id asl.Reference) string {
	if id.IsZero() {
		return h.prefix + "plans/"
	}
	return h.prefix + "plans/" + id.String()
}

// servePlans answers plans/ and plans/ID.
func (h *handler) servePlans(w http.ResponseWriter, r *http.Request, rest string) {
	if h.plans == nil {
		h.errorPage(w, http.StatusNotFound, "no plans here", "This server runs no plans (SPECS.md §24).")
		return
	}
	if rest == "" {
		h.servePlanList(w, r)
		return
	}
	id, ok := h.parseRef(w, rest)
	if !ok {
		return
	}
	x, err := h.plans.Status(r.Context(), id)
	if err != nil {
		if errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity) {
			h.errorPage(w, http.StatusNotFound, "execution not found", fmt.Sprintf("This store holds no execution %s (no ledger under plan/%s/).", id, id))
			return
		}
		h.storeError(w, id, "", err)
		return
	}
	p := execPage{page: h.page("Execution "+shortRef(id.String()), ""), ID: h.refView(id),
		Status: x.Status.String(), Class: execClass(x.Status), Plan: h.refView(x.Submission.Plan),
		Mode: x.Submission.Mode.String(), Label: x.Submission.Label, Head: h.refView(x.Head), Seq: x.Seq,
		Blocked: x.BlockedOn, DecideURL: h.plansURL(id) + "/decide"}
	for _, in := range x.Submission.Inputs {
		p.Inputs = append(p.Inputs, namedRef{Name: printable([]byte(in.Name)), Ref: h.refView(in.Ref)})
	}
	if h.planForm != nil {
		p.CSRF = h.planForm(w, r)
	}
	if p.CSRF != "" {
		// A page with a form token is the caller's own.
		w.Header().Set("Cache-Control", "no-store")
	}
	index := make(map[string]int, len(x.Steps))
	for i, s := range x.Steps {
		index[s.ID] = i
	}
	receipts := make([][]stepReceipt, len(x.Steps))
	for k, ev := range x.Events {
		i, ok := index[ev.Step]
		if ev.Step == "" || ev.Receipt.IsZero() || !ok {
			continue
		}
		receipts[i] = append(receipts[i], h.receiptRow(r, x.Plan.Steps[i].Kind, ev, x.EventRefs[k]))
	}
	for i := range x.Steps {
		p.Steps = append(p.Steps, h.stepRow(x, i, receipts[i], p.CSRF != ""))
	}
	if len(x.Steps) > MaxDAGVertices {
		p.DAGNote = fmt.Sprintf("The plan has %s: too many to draw; the table lists them.", plural(len(x.Steps), "step"))
	} else {
		p.DAG = h.planDAG(x, p.Steps)
	}
	evs := x.Events
	if len(evs) > MaxPlanEvents {
		p.Omitted = len(evs) - MaxPlanEvents
	}
	for k := p.Omitted; k < len(evs); k++ {
		ev := evs[k]
		p.Events = append(p.Events, eventRow{Seq: ev.Seq, Type: ev.Type.String(), Step: printable([]byte(ev.Step)),
			Attempt: ev.Attempt, Reason: printable([]byte(ev.Reason)), Actor: printable([]byte(ev.Actor)),
			Time: time.Unix(0, ev.Time).UTC().Format("2006-01-02 15:04:05.000"), Ref: h.refView(x.EventRefs[k])})
	}
	h.render(w, http.StatusOK, "execution", p)
}

// receiptRow describes the receipt an event of a step names: a PEL step's
// result, or a RECEIPT/1 read for its kind, attempt, outcome and actor.
func (h *handler) receiptRow(r *http.Request, kind plan.StepKind, ev plan.Event, evRef asl.Reference) stepReceipt {
	out := stepReceipt{Ref: h.refView(ev.Receipt)}
	if kind == plan.PELStep {
		out.What = "result"
		return out
	}
	rc, err := h.plans.Ledger().Receipt(r.Context(), ev.Receipt)
	if err != nil {
		out.What = "unreadable receipt: " + errText(err)
		return out
	}
	switch rc.Kind {
	case plan.AttemptReceipt:
		out.What = fmt.Sprintf("attempt %d %s", rc.Attempt, rc.Outcome)
		if rc.ErrorClass != 0 {
			out.What += " (" + rc.ErrorClass.String() + ")"
		}
		if ev.Type == plan.EventStepSucceeded && ev.Reason != "" {
			out.What += " · " + printable([]byte(ev.Reason))
		}
	default:
		out.What = fmt.Sprintf("%s by %s", rc.Kind, printable([]byte(rc.Actor)))
	}
	return out
}

func (h *handler) stepRow(x *plan.Execution, i int, receipts []stepReceipt, forms bool) stepRow {
	ps := &x.Plan.Steps[i]
	s := &x.Steps[i]
	row := stepRow{ID: printable([]byte(s.ID)), Anchor: "step-" + stepAnchor(s.ID), State: s.State.String(),
		Class: stateClass(s.State), Attempts: s.Attempts, Reason: printable([]byte(s.Reason)),
		Decision: printable([]byte(s.Decision)), Waiting: forms && s.State == plan.StateWaitingApproval}
	if s.Class != 0 {
		row.ErrClass = s.Class.String()
	}
	switch ps.Kind {
	case plan.PELStep:
		row.What = "pel"
		row.Program = h.refPtr(ps.Program)
	default:
		row.What = fmt.Sprintf("%s · %s · gate %s", printable([]byte(ps.Effect)), ps.Class, gateText(ps.Gate))
	}
	if n := len(receipts); n > MaxStepReceipts {
		row.Omitted = n - MaxStepReceipts
		receipts = receipts[row.Omitted:]
	}
	row.Receipts = receipts
	for _, o := range s.Outputs {
		row.Outputs = append(row.Outputs, namedRef{Name: printable([]byte(o.Name)), Ref: h.refView(o.Ref)})
	}
	return row
}

func gateText(g plan.Gate) string {
	if g == plan.GateApproval {
		return "approval"
	}
	return "none"
}

// stepAnchor makes a step id usable in a fragment: bytes outside
// [A-Za-z0-9_-] become their hex, so two ids never share an anchor.
func stepAnchor(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "-%02x", c)
		}
	}
	return b.String()
}

// stateClass is the CSS class of a step state: green for succeeded, red
// for failed, amber for what waits for a person, blue for what runs, grey
// for what will not run.
func stateClass(s plan.StepState) string {
	switch s {
	case plan.StateSucceeded:
		return "st-ok"
	case plan.StateFailedFinal:
		return "st-failed"
	case plan.StateWaitingApproval, plan.StateUnknownOutcome:
		return "st-wait"
	case plan.StateReady, plan.StateRunning, plan.StateFailedRetryable:
		return "st-run"
	case plan.StateSkipped, plan.StateCancelled, plan.StateBlocked:
		return "st-skipped"
	}
	return "st-pending"
}

func execClass(s plan.ExecStatus) string {
	switch s {
	case plan.ExecCompleted:
		return "st-ok"
	case plan.ExecWaiting:
		return "st-wait"
	case plan.ExecRunning:
		return "st-run"
	case plan.ExecPartial:
		return "st-failed"
	}
	return "st-skipped"
}

// servePlanList renders the executions of the store in the order the
// ledger lists them (their ids, ascending): only the first MaxPlanRows are
// folded, and one whose ledger does not fold is listed with the error.
func (h *handler) servePlanList(w http.ResponseWriter, r *http.Request) {
	p := plansPage{page: h.page("Plans", "")}
	ids, err := h.plans.Ledger().Executions(r.Context())
	if err != nil {
		p.Note = "The executions could not be listed: " + errText(err)
	}
	if len(ids) > MaxPlanRows {
		p.Omitted = len(ids) - MaxPlanRows
		ids = ids[:MaxPlanRows]
	}
	for _, id := range ids {
		x, err := h.plans.Status(r.Context(), id)
		if err != nil {
			p.Rows = append(p.Rows, planRow{ID: h.refView(id), Href: h.plansURL(id), Status: "unreadable", Class: "st-failed", Blocked: errText(err)})
			continue
		}
		row := planRow{ID: h.refView(x.ID), Href: h.plansURL(x.ID), Plan: h.refPtr(x.Submission.Plan),
			Mode: x.Submission.Mode.String(), Status: x.Status.String(), Class: execClass(x.Status)}
		var counts [16]int
		for _, s := range x.Steps {
			if int(s.State) < len(counts) {
				counts[s.State]++
			}
		}
		var parts []string
		for st, n := range counts {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, plan.StepState(st)))
			}
		}
		row.Steps = strings.Join(parts, " · ")
		var bs []string
		for _, b := range x.BlockedOn {
			bs = append(bs, printable([]byte(b.Step))+":"+b.Reason)
		}
		row.Blocked = strings.Join(bs, " ")
		p.Rows = append(p.Rows, row)
	}
	h.render(w, http.StatusOK, "plans", p)
}

// planDAG draws the steps of x as a graph: columns by the longest path
// from a step without dependencies, steps in plan order within a column,
// an edge from each dependency to its dependent, each box coloured by its
// step's state. Coordinates depend on the plan and the states alone.
func (h *handler) planDAG(x *plan.Execution, rows []stepRow) *dagView {
	n := len(x.Steps)
	col := make([]int, n)
	// Steps are in ID order, not topological order: relax until stable
	// (a plan is acyclic, §22.3, so n rounds suffice; a cycle stops there).
	for round := 0; round < n; round++ {
		changed := false
		for i := 0; i < n; i++ {
			c := 0
			for _, d := range x.Deps(i) {
				c = max(c, col[d]+1)
			}
			if c != col[i] {
				col[i], changed = c, true
			}
		}
		if !changed {
			break
		}
	}
	cols := 0
	rowOf := make([]int, n)
	var perCol []int
	for i := 0; i < n; i++ {
		for len(perCol) <= col[i] {
			perCol = append(perCol, 0)
		}
		rowOf[i] = perCol[col[i]]
		perCol[col[i]]++
		cols = max(cols, col[i]+1)
	}
	maxRows := 0
	for _, k := range perCol {
		maxRows = max(maxRows, k)
	}
	x0 := func(i int) int { return dagMargin + col[i]*(dagBoxW+dagColGap) }
	y0 := func(i int) int { return dagMargin + rowOf[i]*(planBoxH+dagRowGap) }
	dv := &dagView{Width: 2*dagMargin + cols*dagBoxW + max(cols-1, 0)*dagColGap,
		Height: 2*dagMargin + maxRows*planBoxH + max(maxRows-1, 0)*dagRowGap,
		Label:  fmt.Sprintf("plan of %s", plural(n, "step"))}
	for i := 0; i < n; i++ {
		for _, d := range x.Deps(i) {
			var p strings.Builder
			fmt.Fprintf(&p, "M%d,%d", x0(d)+dagBoxW, y0(d)+planBoxH/2)
			class := "edge"
			if col[i] <= col[d] {
				class = "edge back"
			}
			curve(&p, x0(d)+dagBoxW, y0(d)+planBoxH/2, x0(i), y0(i)+planBoxH/2)
			dv.Edges = append(dv.Edges, dagEdge{D: p.String(), Class: class})
		}
	}
	for i := 0; i < n; i++ {
		row := rows[i]
		b := dagBox{X: x0(i), Y: y0(i), W: dagBoxW, H: planBoxH, Class: "node step " + row.Class,
			Href: "#" + row.Anchor, NodeID: row.ID, Title: row.ID + ": " + row.State}
		ps := &x.Plan.Steps[i]
		what := printable([]byte(ps.Effect)) + " · " + ps.Class.String()
		if row.Program != nil {
			what = "pel " + row.Program.Short
		}
		lines := []dagText{{Class: "op", Text: truncateRunes(row.ID, planIDRunes)},
			{Class: "sub", Text: truncateRunes(what, dagSubRunes)},
			{Class: "st", Text: row.State}}
		y := b.Y + (planBoxH-(len(lines)-1)*dagLineStep)/2 + dagBaseline
		for k := range lines {
			lines[k].X, lines[k].Y = b.X+dagTextX, y+k*dagLineStep
		}
		b.Lines = lines
		dv.Boxes = append(dv.Boxes, b)
	}
	return dv
}
