package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// helpExamples holds the Example text of commands whose definition gives none,
// keyed by the command's path below the root. completeHelp installs them.
var helpExamples = map[string]string{
	"completion":           "  amduat completion bash > /etc/bash_completion.d/amduat\n  source <(amduat completion zsh)",
	"conformance":          "  amduat conformance run\n  amduat conformance run vectors",
	"conformance generate": "  amduat conformance generate vectors            # rewrite every category\n  amduat conformance generate vectors asl.reference   # one category",
	"conformance run":      "  amduat conformance run                  # the embedded vectors\n  amduat --json conformance run vectors   # the files of a directory",
	"demo":                 "  amduat demo\n  amduat demo --dir /tmp/amduat-demo   # keep the store and inputs",
	"docs":                 "  amduat docs docs/cli\n  amduat docs --format man /usr/local/share/man/man1",
	"du":                   "  amduat du\n  amduat --json du --type-tag 0x101 --min-size 1M",
	"has":                  "  amduat has 00011f1d4ea7...e895e4\n  amduat ls -q | amduat has --stdin",
	"import":               "  amduat import run.amdb\n  amduat --store /other import a.amdb b.amdb",
	"init":                 "  amduat init\n  amduat --store /srv/amduat init --hash blake3",
	"pel":                  "  prog=$(amduat pel build prog.json)\n  amduat pel run --program \"$prog\" --input \"$(printf hi | amduat put)\"",
	"pel cache":            "  amduat pel cache salt\n  amduat pel cache salt --set 2026-11",
	"pel cache salt":       "  amduat pel cache salt               # print the salt\n  amduat pel cache salt --set 2026-11 # disown every cached entry",
	"pel verify":           "  amduat pel verify 00012b7ccdfe",
	"pin":                  "  amduat pin add last 00012b7ccdfe\n  amduat pin ls\n  amduat pin rm last",
	"pin add":              "  amduat pin add last 00012b7ccdfe",
	"pin ls":               "  amduat pin ls\n  amduat --json pin ls",
	"pin rm":               "  amduat pin rm last old",
	"prov":                 "  amduat prov why 0001de2f55aa\n  amduat prov uses 000143b541b5",
	"prov reindex":         "  amduat prov reindex",
	"prov uses":            "  amduat prov uses 000143b541b5\n  amduat prov uses --depth 1 --dot 000143b541b5 | dot -Tsvg > uses.svg",
	"prov why":             "  amduat prov why 0001de2f55aa\n  amduat --json prov why --depth 2 0001de2f55aa",
	"rm":                   "  amduat rm 00011f1d4ea7...e895e4\n  amduat rm --force 00011f1d",
	"stat":                 "  amduat stat 00011f1d4ea7...e895e4\n  amduat ls -q | amduat stat --stdin",
	"token":                "  amduat token add ci --scope read,write,run --auth-file tokens\n  amduat token list --auth-file tokens\n  amduat token revoke ci --auth-file tokens",
	"token add":            "  amduat token add ci --scope read,write,run --auth-file tokens",
	"token list":           "  amduat token list --auth-file tokens",
	"token revoke":         "  amduat token revoke ci --auth-file tokens",
	"version":              "  amduat version\n  amduat --json version",
	"wasm":                 "  mod=$(amduat wasm add upper.wasm)\n  amduat wasm inspect \"$mod\"",
	"wasm inspect":         "  amduat wasm inspect \"$(amduat wasm add upper.wasm)\"\n  amduat --json wasm inspect 0001b8a1c2d3",
}

// exitCodeFooter ends the help of every command below the root (whose
// Long text holds the table already).
const exitCodeFooter = `{{if .HasParent}}
` + exitCodeHelp + `
{{end}}`

// completeHelp gives every command of the tree under root an example (from
// helpExamples when its definition has none) and the exit code table in its
// help (SPECS.md §16.2), and makes every command group (pel, pin, …)
// refuse an unknown subcommand.
func completeHelp(a *app, root *cobra.Command) {
	root.SetUsageTemplate(root.UsageTemplate() + exitCodeFooter)
	// `amduat help TOPIC` of an unknown topic is a usage error, as
	// `amduat TOPIC` is, not cobra's "Unknown help topic" with exit 0.
	root.InitDefaultHelpCmd()
	for _, h := range root.Commands() {
		if h.Name() != "help" || h.Run == nil {
			continue
		}
		show := h.Run
		h.Run = nil
		h.RunE = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				if _, _, err := root.Find(args); err != nil {
					return usagef("no help topic %q: %v", strings.Join(args, " "), err)
				}
			}
			show(c, args)
			return nil
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = helpExamples[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")]
		}
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.RunE = groupRun(a)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// groupRun runs a command group (the root, pel, pin, …) given no known
// subcommand: an unknown one is a usage error (exit 2) naming it; none
// prints the group's help (exit 0), except under --json, where stdout
// holds only JSON: there it is a usage error too.
func groupRun(a *app) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		if len(args) > 0 {
			return usagef("unknown command %q for %q (want one of: %s)", args[0], c.CommandPath(), strings.Join(names, ", "))
		}
		if a.jsonOut {
			return usagef("a command is needed: one of %s", strings.Join(names, ", "))
		}
		return c.Help()
	}
}
