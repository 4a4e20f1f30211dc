package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/s3store"
)

// The store life cycle commands of SPECS.md §16.3: pins (named roots), rm,
// and the repair path of verify. Pins and rm work on the embedded store and
// on a server (--store http://…, its admin routes: maintain.go).

func init() {
	addCommand(newPinCmd)
	addCommand(newRmCmd)
}

// embedded returns s as the embedded store, or ERR_UNSUPPORTED naming what
// needs it.
func embedded(s backend, what string) (*pebblestore.Store, error) {
	ps, ok := s.(*pebblestore.Store)
	if !ok {
		return nil, notEmbedded("", what, s)
	}
	return ps, nil
}

// notEmbedded is the ERR_UNSUPPORTED (exit 5) of a command that needs the
// embedded store, naming what the store is instead.
func notEmbedded(subject, what string, s any) error {
	kind := "a server"
	if _, ok := s.(*s3store.Store); ok {
		kind = "a bucket"
	}
	return fail(exitUnsupported, subject, fmt.Errorf("%s needs an embedded store (--store DIR), not %s: %w", what, kind, asl.ErrUnsupported))
}

func (a *app) openEmbedded(what string, readOnly bool) (*pebblestore.Store, error) {
	if isRemote(a.storeDir) {
		return nil, notEmbedded(a.storeDir, what, nil)
	}
	var s backend
	var err error
	if readOnly {
		s, err = a.openStoreReadOnly()
	} else {
		s, err = a.openStore()
	}
	if err != nil {
		return nil, err
	}
	ps, err := embedded(s, what)
	if err != nil {
		s.Close()
		return nil, err
	}
	return ps, nil
}

func newPinCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "pin add NAME REF | pin ls | pin rm NAME... | pin log [NAME]",
		Short: "Name roots that garbage collection and rm keep",
		Long: `Pins are named roots (SPECS.md §19.8): gc keeps everything a pin reaches
(SPECS.md §19.6), and rm refuses to delete it without --force.

  pin add NAME REF   names REF (which must be stored) NAME; re-pointing a
                     NAME that names another reference needs --force
                     (exit 1 without it)
  pin ls             lists the pins, "NAME REF" in name order
  pin rm NAME...     removes pins (a NAME that is not a pin: exit 3)
  pin log [NAME]     the history of NAME (of every pin), newest first

Against a server (--store http://…) the server keeps the pins of its store
(a token with the admin scope; SPECS.md §18.10); the output is the same.`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return usagef("unknown pin subcommand %q (add, ls, rm, log)", args[0])
		},
	}
	var force bool
	add := &cobra.Command{
		Use:   "add NAME REF",
		Short: "Pin REF under NAME",
		Args:  rangeArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if err := pebblestore.CheckPinName(args[0]); err != nil {
				return usageErr(err)
			}
			s, err := a.openMaint("pin add", false)
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			ref, err := a.parseRefIn(s, args[1])
			if err != nil {
				return err
			}
			if err := s.Pin(asl.WithActor(c.Context(), "local"), args[0], ref, asl.PinOptions{Force: force}); err != nil {
				if errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity) {
					return refErr(args[1], err)
				}
				if errors.Is(err, asl.ErrPinExists) {
					return fail(exitNegative, args[0], err)
				}
				return failAuto(args[0], err)
			}
			if a.jsonOut {
				return a.printJSON(pebblestore.Pin{Name: args[0], Ref: ref})
			}
			a.printf("%s %s\n", args[0], ref)
			return nil
		},
	}
	add.Flags().BoolVar(&force, "force", false, "re-point NAME when it already names another reference (exit 1 without it)")
	c.AddCommand(add)
	c.AddCommand(newPinLogCmd(a)) // pinlog.go
	c.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List the pins",
		Args:  rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			s, err := a.openMaint("pin ls", true)
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			pins, err := s.Pins(c.Context())
			if err != nil {
				return failAuto("", err)
			}
			if a.jsonOut {
				if pins == nil {
					pins = []pebblestore.Pin{}
				}
				return a.printJSON(struct {
					Pins []pebblestore.Pin `json:"pins"`
				}{pins})
			}
			for _, p := range pins {
				a.printf("%s %s\n", p.Name, p.Ref)
			}
			return nil
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove pins",
		Args:  minArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			s, err := a.openMaint("pin rm", false)
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			var missing []string
			removed := []string{}
			for _, name := range args {
				ok, err := s.Unpin(asl.WithActor(c.Context(), "local"), name)
				if err != nil {
					return failAuto(name, err)
				}
				if !ok {
					missing = append(missing, name)
					a.warnf(name, errors.New("no such pin"))
					continue
				}
				removed = append(removed, name)
				a.printf("removed %s\n", name)
			}
			if a.jsonOut {
				if missing == nil {
					missing = []string{}
				}
				if err := a.printJSON(struct {
					Removed []string `json:"removed"`
					Missing []string `json:"missing"`
				}{removed, missing}); err != nil {
					return err
				}
			}
			if len(missing) > 0 {
				return exitStatus(exitNotFound)
			}
			return nil
		},
	})
	return c
}

// rmItem is one line of `rm --json` (states deleted, missing, refused,
// kept), the same object a server answers (SPECS.md §18.10).
type rmItem = httpstore.DeleteItem

func newRmCmd(a *app) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "rm [--force] REF...",
		Short: "Delete artifacts (refuses pinned or reachable ones without --force)",
		Long: `Delete each REF from the store (SPECS.md §6.4, "Deletion"): its index record
goes, a tombstone keeps it from coming back when the store is reopened or
rebuilt from its packs, and its bytes are reclaimed when gc compacts the
pack that holds them.

A REF that a pin names or that a pin reaches (SPECS.md §19.6) is refused,
with the reason ("pinned as NAME", "reachable from pin NAME"), unless
--force is given; nothing is deleted when any REF is refused. A REF that is
not stored is reported "missing".

Exit 0 when every REF was deleted, 1 when some were refused (nothing
deleted), 3 when some were missing (the others deleted). Against a server
(--store http://…) the server judges and deletes, in one request (a token
with the admin scope).`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			s, err := a.openMaint("rm", false)
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			refs := make([]asl.Reference, len(args))
			for i, arg := range args {
				if refs[i], err = a.parseRefIn(s, arg); err != nil {
					return err
				}
			}
			items, err := removeRefs(c.Context(), s, refs, force)
			if err != nil {
				return failAuto("", err)
			}
			refused, missing := 0, 0
			for _, it := range items {
				if it.State == "refused" {
					refused++
					a.warnf(it.Ref.String(), fmt.Errorf("refused: %s (use --force to delete it anyway)", it.Reason))
				}
			}
			if refused == 0 {
				for _, it := range items {
					if it.Deleted {
						a.printf("deleted %s\n", it.Ref)
					} else {
						missing++
						a.warnf(it.Ref.String(), errors.New("not stored"))
					}
				}
			}
			if a.jsonOut {
				if err := a.printJSON(struct {
					Refs []rmItem `json:"refs"`
				}{items}); err != nil {
					return err
				}
			}
			switch {
			case refused > 0:
				return exitStatus(exitNegative)
			case missing > 0:
				return exitStatus(exitNotFound)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "delete even a pinned or reachable artifact")
	return c
}

// repairer is what `verify --repair` needs of a store.
type repairer interface {
	backend
	Repair(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]pebblestore.RepairResult, error)
}

// s3Repairer repairs on a bucket (SPECS.md §6.7, "Repair"): the stored copy
// is read verified; when damaged, a put of the artifact replaces it (a put
// on a bucket overwrites an object found damaged), and the copy is read
// again.
type s3Repairer struct{ *s3store.Store }

func (s s3Repairer) Repair(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]pebblestore.RepairResult, error) {
	out := make([]pebblestore.RepairResult, len(arts))
	for i, art := range arts {
		ref, err := asl.Derive(id, art)
		if err != nil {
			return nil, err
		}
		out[i].Ref = ref
		_, gerr := asl.Get(ctx, s.Store, ref, 0)
		switch {
		case gerr == nil:
			out[i].State = "ok"
			continue
		case errors.Is(gerr, asl.ErrNotFound):
			out[i].State = "stored"
		case errors.Is(gerr, asl.ErrIntegrity):
			out[i].State, out[i].Damage = "repaired", gerr.Error()
		default:
			return nil, gerr
		}
		if _, err := asl.PutArtifact(ctx, s.Store, id, art); err != nil {
			return nil, err
		}
		if _, err := asl.Get(ctx, s.Store, ref, 0); err != nil {
			return nil, fmt.Errorf("%s: still unreadable after the put: %w", ref, err)
		}
	}
	return out, nil
}

// verifyRepair is `verify --repair FILE...`: each FILE is read and put
// through pebblestore.Repair (or, on a bucket, s3Repairer.Repair), which
// verifies the stored copy of its artifact and replaces it when damaged
// (SPECS.md §6.4, "Repair").
func (a *app) verifyRepair(c *cobra.Command, files []string, tag typeTagValue, hashName string) (err error) {
	var s repairer
	if isS3(a.storeDir) {
		st, err := a.openS3(false, 0)
		if err != nil {
			return err
		}
		s = s3Repairer{st}
	} else {
		ps, err := a.openEmbedded("verify --repair", false)
		if err != nil {
			return err
		}
		s = ps
	}
	defer closeStore(s, a.storeDir, &err)
	id := s.DefaultHash()
	if hashName != "" {
		alg, err := hashFlag(hashName)
		if err != nil {
			return err
		}
		id = alg.ID
	}
	type repaired struct {
		File string `json:"file"`
		pebblestore.RepairResult
	}
	out := []repaired{}
	fixed := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fail(exitIO, f, unwrapPathError(err))
		}
		art := asl.Artifact{Bytes: b, Tag: tag.tag, HasTag: tag.set}
		res, err := s.Repair(c.Context(), id, []asl.Artifact{art})
		if err != nil {
			return failAuto(f, err)
		}
		r := res[0]
		if r.State == "repaired" {
			fixed++
		}
		out = append(out, repaired{f, r})
		a.printf("%s %s %s\n", r.Ref, r.State, f)
	}
	if a.jsonOut {
		return a.printJSON(struct {
			Repaired int        `json:"repaired"`
			Files    []repaired `json:"files"`
		}{fixed, out})
	}
	return nil
}
