package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
)

func init() { addPELCommand(newPELSeedCmd) }

// pelSeedInfo describes the reference seed programs (SPECS.md §11.4) for
// `pel seed --list`.
var pelSeedInfo = map[string]struct {
	inputs int
	about  string
}{
	pel.SeedConst:     {0, `pel.bytes.const "hello"; no inputs`},
	pel.SeedConcat:    {2, "pel.bytes.concat of input 0 and input 1"},
	pel.SeedConcat1:   {1, "pel.bytes.concat of input 0 alone: its bytes, untagged"},
	pel.SeedSlice:     {1, "pel.bytes.slice of input 0, offset 1, length 3"},
	pel.SeedHash:      {1, "pel.bytes.hash.asl1 (SHA-256) of input 0's bytes"},
	pel.SeedConstHash: {0, `pel.bytes.const "hello", then pel.bytes.hash.asl1 of it`},
}

type pelSeedItem struct {
	Name        string        `json:"name"`
	Inputs      int           `json:"inputs"`
	Description string        `json:"description"`
	Ref         asl.Reference `json:"ref"`
}

type pelSeedResult struct {
	Name    string        `json:"name"`
	Ref     asl.Reference `json:"ref"`
	Size    uint64        `json:"size"`
	TypeTag uint32        `json:"type_tag"`
	Inputs  int           `json:"inputs"`
}

func newPELSeedCmd(a *app) *cobra.Command {
	var (
		list     bool
		hashName string
	)
	c := &cobra.Command{
		Use:   "seed NAME | --list",
		Short: "Store a reference seed program and print its reference",
		Long: `Store the reference seed program NAME as a program artifact (type tag
0x00000101) and print its reference. --list prints every seed as
"NAME<TAB>INPUTS<TAB>DESCRIPTION" (INPUTS: how many --input references pel run
needs) and does not need a store; with --json it prints
{"seeds":[{"name","inputs","description","ref"}]} where ref is the SHA-256
reference.

Seeds: const, concat, concat1, slice, hash, const-hash.`,
		Example: `  amduat pel seed --list
  prog=$(amduat pel seed concat)`,
		RunE: func(c *cobra.Command, args []string) (err error) {
			if list {
				if len(args) != 0 {
					return usagef("--list takes no arguments")
				}
				return a.pelSeedList()
			}
			if len(args) != 1 {
				return usagef("needs a seed NAME (or --list), got %d arguments", len(args))
			}
			art, err := pel.SeedArtifact(args[0])
			if err != nil {
				return usagef("%v", err)
			}
			ref, err := a.storeProgram(c.Context(), hashName, args[0], art)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(pelSeedResult{Name: args[0], Ref: ref, Size: uint64(len(art.Bytes)),
					TypeTag: uint32(art.Tag), Inputs: pelSeedInfo[args[0]].inputs})
			}
			a.printf("%s\n", ref)
			return nil
		},
	}
	c.Flags().BoolVar(&list, "list", false, "list the seed programs")
	c.Flags().StringVar(&hashName, "hash", "", "hash for the program artifact: sha256 or blake3 (default: the store's)")
	return c
}

func (a *app) pelSeedList() error {
	var items []pelSeedItem
	for _, name := range pel.SeedNames() {
		art, err := pel.SeedArtifact(name)
		if err != nil {
			return fail(exitIO, name, err)
		}
		info := pelSeedInfo[name]
		items = append(items, pelSeedItem{Name: name, Inputs: info.inputs, Description: info.about,
			Ref: asl.MustDerive(asl.HashSHA256, art)})
	}
	if a.jsonOut {
		return a.printJSON(struct {
			Seeds []pelSeedItem `json:"seeds"`
		}{items})
	}
	for _, it := range items {
		a.printf("%s\t%d\t%s\n", it.Name, it.Inputs, it.Description)
	}
	return nil
}

// pelHash resolves a --hash flag; empty means def.
func (a *app) pelHash(name string, def asl.HashID) (asl.HashID, error) {
	if name == "" {
		return def, nil
	}
	alg, err := hashFlag(name)
	if err != nil {
		return 0, err
	}
	return alg.ID, nil
}

// pelSeedInputs is the number of external inputs seed name reads.
func pelSeedInputs(name string) (int, error) {
	info, ok := pelSeedInfo[name]
	if !ok {
		return 0, fmt.Errorf("unknown seed %q", name)
	}
	return info.inputs, nil
}
