package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
)

func init() {
	addCommand(newHasCmd)
	addCommand(newStatCmd)
}

type hasItem struct {
	Ref     asl.Reference `json:"ref"`
	Present bool          `json:"present"`
}

type hasResult struct {
	Refs       []hasItem `json:"refs"`
	AllPresent bool      `json:"all_present"`
}

func newHasCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "has REF...",
		Short: "Tell whether artifacts are stored (exit 0 if all, 1 if any is missing)",
		Long: `Print "REF present" or "REF missing" for each REF, and exit 0 when every REF is
stored, 1 when any is missing. Presence is read from the store's index; the
bytes are not read (use verify for that).`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			refs, err := parseRefs(args)
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			res := hasResult{Refs: make([]hasItem, 0, len(refs)), AllPresent: true}
			for i, ref := range refs {
				ok, err := asl.Has(c.Context(), s, ref)
				if err != nil {
					return refErr(args[i], err)
				}
				res.Refs = append(res.Refs, hasItem{ref, ok})
				res.AllPresent = res.AllPresent && ok
				state := "present"
				if !ok {
					state = "missing"
				}
				a.printf("%s %s\n", ref, state)
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			}
			if !res.AllPresent {
				return exitStatus(exitNegative)
			}
			return nil
		},
	}
}

type statItem struct {
	Ref         asl.Reference `json:"ref"`
	Size        uint64        `json:"size"`
	TypeTag     *uint32       `json:"type_tag"`
	StoredSize  int64         `json:"stored_size"`
	Compression string        `json:"compression"`
}

type statResult struct {
	Artifacts []statItem `json:"artifacts"`
}

func newStatCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "stat REF...",
		Short: "Show size, type tag, stored size and compression of artifacts",
		Long: `Print one line per REF:

  REF size=N type_tag=0xHHHHHHHH|none stored_size=N compression=none|zstd|mixed

size is the payload length, stored_size the bytes the store keeps after
compression (-1 if the backend cannot tell). Stops at the first REF that is
not stored (exit 3). Bytes are not read or verified (use verify).`,
		Args: minArgs(1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			refs, err := parseRefs(args)
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			res := statResult{Artifacts: make([]statItem, 0, len(refs))}
			for i, ref := range refs {
				in, err := s.Stat(c.Context(), ref)
				if err != nil {
					return refErr(args[i], err)
				}
				in.Ref = ref
				res.Artifacts = append(res.Artifacts, statItem{Ref: ref, Size: in.Size, TypeTag: tagPtr(in.Header),
					StoredSize: in.StoredSize, Compression: in.Compression})
				a.printf("%s\n", statLine(in))
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			return nil
		},
	}
}

// statLine renders one artifact's info for stat's text output.
func statLine(in asl.Info) string {
	return fmt.Sprintf("%s size=%d type_tag=%s stored_size=%d compression=%s",
		in.Ref, in.Size, in.TagString(), in.StoredSize, in.Compression)
}
