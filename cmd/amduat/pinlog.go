package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

// pin log (the history of pins, SPECS.md §19.8) and the --pin flags of put
// and import: what they store is pinned with no garbage collection in
// between.

func newPinLogCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "log [NAME]",
		Short: "Show the history of a pin (of every pin without NAME), newest first",
		Long: `Print every change of the pin NAME (of every pin without NAME), newest
first, as git reflog does: one line per change,

  SEQ TIME NAME add NEW by ACTOR
  SEQ TIME NAME re-point NEW (was OLD) by ACTOR
  SEQ TIME NAME rm (was OLD) by ACTOR

SEQ numbers the changes of the store from 1, in the order made; TIME is
UTC (RFC 3339, nanoseconds); ACTOR is who made the change ("local" for the
command line; "by ACTOR" is left out when none was recorded). Changes are
store metadata (SPECS.md §19.8): they never enter an artifact or a
reference.

--json prints {"changes": [{"seq", "name", "old", "new", "time_unix_nano",
"time", "actor"}]} in the same order (old or new null for none).`,
		Example: `  amduat pin log
  amduat pin log docs
  amduat --json pin log docs`,
		Args: rangeArgs(0, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			name := ""
			if len(args) == 1 {
				name = args[0]
				if err := pebblestore.CheckPinName(name); err != nil {
					return usageErr(err)
				}
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			pl, ok := s.(asl.PinLogger)
			if !ok {
				return fail(exitUnsupported, a.storeDir, fmt.Errorf("pin log: this store keeps no pin history: %w", asl.ErrUnsupported))
			}
			changes, err := pl.PinLog(c.Context(), name)
			if err != nil {
				return failAuto(name, err)
			}
			out := make([]pinLogLine, 0, len(changes))
			for i := len(changes) - 1; i >= 0; i-- {
				out = append(out, newPinLogLine(changes[i]))
			}
			if a.jsonOut {
				if err := a.printJSON(struct {
					Changes []pinLogLine `json:"changes"`
				}{out}); err != nil {
					return err
				}
			} else {
				for _, l := range out {
					a.printf("%s\n", l.text())
				}
			}
			if name != "" && len(changes) == 0 {
				a.warnf(name, errors.New("no such pin, and none in the history"))
				return exitStatus(exitNotFound)
			}
			return nil
		},
	}
}

// pinLogLine is one change as pin log prints it.
type pinLogLine struct {
	Seq      uint64         `json:"seq"`
	Name     string         `json:"name"`
	Old      *asl.Reference `json:"old"`
	New      *asl.Reference `json:"new"`
	UnixNano int64          `json:"time_unix_nano"`
	Time     string         `json:"time"`
	Actor    string         `json:"actor"`
}

func newPinLogLine(c asl.PinChange) pinLogLine {
	l := pinLogLine{Seq: c.Seq, Name: c.Name, UnixNano: c.UnixNano, Actor: c.Actor,
		Time: time.Unix(0, c.UnixNano).UTC().Format(time.RFC3339Nano)}
	if !c.Old.IsZero() {
		old := c.Old
		l.Old = &old
	}
	if !c.New.IsZero() {
		n := c.New
		l.New = &n
	}
	return l
}

func (l pinLogLine) text() string {
	s := strconv.FormatUint(l.Seq, 10) + " " + l.Time + " " + l.Name
	switch {
	case l.Old == nil && l.New != nil:
		s += " add " + l.New.String()
	case l.New != nil:
		s += " re-point " + l.New.String() + " (was " + l.Old.String() + ")"
	case l.Old != nil:
		s += " rm (was " + l.Old.String() + ")"
	default:
		s += " rm"
	}
	if l.Actor != "" {
		s += " by " + l.Actor
	}
	return s
}

// putThenPin runs put, which stores through s, and pins the pins it
// returns. On the embedded store no garbage collection runs between the
// two (pebblestore.Store.PutThenPin), so nothing put is garbage before it
// is pinned; on any other store that keeps pins (asl.Pinner) the pins
// follow the put. A name that names another reference is re-pointed only
// with force (exit 1 otherwise; what was put stays stored).
func putThenPin(ctx context.Context, s backend, force bool, put func(context.Context) ([]asl.Pin, error)) ([]asl.Pin, error) {
	ctx = asl.WithActor(ctx, "local")
	opts := asl.PinOptions{Force: force}
	var (
		pins []asl.Pin
		err  error
	)
	if ps, ok := s.(*pebblestore.Store); ok {
		pins, err = ps.PutThenPin(ctx, opts, put)
	} else if pn, ok := s.(asl.Pinner); ok {
		if pins, err = put(ctx); err == nil {
			for _, p := range pins {
				if err = pn.Pin(ctx, p.Name, p.Ref, opts); err != nil {
					err = fmt.Errorf("pin %s: %w", p.Name, err)
					break
				}
			}
		}
	} else {
		return nil, fail(exitUnsupported, "", fmt.Errorf("--pin: this store keeps no pins: %w", asl.ErrUnsupported))
	}
	var ce *cliError
	switch {
	case err == nil:
		return pins, nil
	case errors.As(err, &ce):
		return nil, err
	case errors.Is(err, asl.ErrPinExists):
		return nil, fail(exitNegative, "", fmt.Errorf("%w (what was put is stored, not pinned)", err))
	default:
		return nil, failAuto("", err)
	}
}

// importPins names the roots of one imported bundle (SPECS.md §19.8): NAME
// for a bundle of one root, NAME/1 .. NAME/k in the bundle's order for k
// roots.
func importPins(name string, roots []asl.Reference) []asl.Pin {
	if len(roots) == 1 {
		return []asl.Pin{{Name: name, Ref: roots[0]}}
	}
	pins := make([]asl.Pin, len(roots))
	for i, r := range roots {
		pins[i] = asl.Pin{Name: name + "/" + strconv.Itoa(i+1), Ref: r}
	}
	return pins
}
