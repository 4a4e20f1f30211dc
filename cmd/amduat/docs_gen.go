package main

// The command reference generator of `amduat docs`. It is this program's
// own, not github.com/spf13/cobra/doc: that package links a Markdown
// renderer whose package init (an HTML entity table of some 200 KB) every
// amduat command paid before main (issue 24).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// docCommands lists c and the commands under it that a reference shows:
// available commands, not help topics, depth first in the order cobra
// keeps them (sorted by name).
func docCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		out = append(out, docCommands(sub)...)
	}
	return out
}

// docRelated lists the commands a page links to: the parent, then the
// shown subcommands.
func docRelated(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if c.HasParent() {
		out = append(out, c.Parent())
	}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
			out = append(out, sub)
		}
	}
	return out
}

func docDescription(c *cobra.Command) string {
	if c.Long != "" {
		return c.Long
	}
	return c.Short
}

// writeMarkdownTree writes one Markdown page per command into dir:
// amduat.md, amduat_put.md, amduat_pel_run.md, ...
func writeMarkdownTree(root *cobra.Command, dir string) error {
	for _, c := range docCommands(root) {
		name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		if err := os.WriteFile(filepath.Join(dir, name), markdownPage(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func markdownPage(c *cobra.Command) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## %s\n\n%s\n\n### Synopsis\n\n%s\n\n", c.CommandPath(), c.Short, docDescription(c))
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "### Examples\n\n```\n%s\n```\n\n", c.Example)
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "### Options\n\n```\n%s```\n\n", fs.FlagUsages())
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, "### Options inherited from parent commands\n\n```\n%s```\n\n", fs.FlagUsages())
	}
	if rel := docRelated(c); len(rel) > 0 {
		b.WriteString("### SEE ALSO\n\n")
		for _, r := range rel {
			fmt.Fprintf(&b, "* [%s](%s.md)\t - %s\n", r.CommandPath(), strings.ReplaceAll(r.CommandPath(), " ", "_"), r.Short)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// writeManTree writes one man page per command into dir, in section 1:
// amduat.1, amduat-put.1, amduat-pel-run.1, ... The pages carry no date,
// so the same command tree always gives the same bytes.
func writeManTree(root *cobra.Command, dir, source string) error {
	for _, c := range docCommands(root) {
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		if err := os.WriteFile(filepath.Join(dir, name), manPage(c, source), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// roffText escapes s for a roff text block: backslashes, and a control
// character (a period or an apostrophe) opening a line.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

func manPage(c *cobra.Command, source string) []byte {
	var b bytes.Buffer
	dashed := strings.ReplaceAll(c.CommandPath(), " ", "-")
	fmt.Fprintf(&b, ".TH \"AMDUAT\" \"1\" \"\" \"%s\" \"amduat manual\"\n", roffText(source))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffText(dashed), roffText(c.Short))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.nf\n%s\n.fi\n", roffText(c.UseLine()))
	fmt.Fprintf(&b, ".SH DESCRIPTION\n.nf\n%s\n.fi\n", roffText(docDescription(c)))
	if c.Example != "" {
		fmt.Fprintf(&b, ".SH EXAMPLES\n.nf\n%s\n.fi\n", roffText(c.Example))
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, ".SH OPTIONS\n.nf\n%s.fi\n", roffText(fs.FlagUsages()))
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintf(&b, ".SH OPTIONS INHERITED FROM PARENT COMMANDS\n.nf\n%s.fi\n", roffText(fs.FlagUsages()))
	}
	if rel := docRelated(c); len(rel) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, r := range rel {
			sep := ","
			if i == len(rel)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, ".BR %s (1)%s\n", roffText(strings.ReplaceAll(r.CommandPath(), " ", "-")), sep)
		}
	}
	return b.Bytes()
}
