package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/interlockhq/interlock/docs"
)

const schemaAbout = `schema prints Interlock's wire contract as built into this binary, so that
a client gets the contract of exactly the version it talks to. With no
argument it lists the JSON Schemas (draft 2020-12) of the data of every
event Interlock reads and publishes, of the checkpoint document and of the
pending index entry; with a NAME it prints that schema; with --asyncapi it
prints the AsyncAPI 3.0 document (YAML), which puts the schemas on their
NATS subjects and describes the CloudEvents envelope.

The schemas refer to each other by $id (a common base and the file name):
load them all into your validator, for example after

  for s in $(interlock schema --names); do interlock schema "$s" > "$s.json"; done
`

// schemaCmd prints the AsyncAPI document, a JSON Schema, or the list of
// schemas.
func schemaCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("schema", "schema [--asyncapi | --names | --json | NAME]", stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: interlock schema [--asyncapi | --names | --json | NAME]\n\n%s\nFlags:\n", schemaAbout)
		fs.PrintDefaults()
		fmt.Fprintf(w, "\nExit codes: 0 done, 1 failed, 2 bad usage (also: no schema of that name).\n")
	}
	asyncapi := fs.Bool("asyncapi", false, "print the AsyncAPI 3.0 document (YAML)")
	names := fs.Bool("names", false, "list the schemas' names only, one a line")
	asJSON := fs.Bool("json", false, "list the schemas as JSON (schema/index.json)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) > 1 {
		return usageOf("schema", "schema takes one name, but was given %q", pos)
	}
	if len(pos) == 1 && (*asyncapi || *names || *asJSON) || *asyncapi && (*names || *asJSON) {
		return usageOf("schema", "give a NAME, --asyncapi, --names or --json, not several")
	}
	switch {
	case *asyncapi || len(pos) == 1 && pos[0] == "asyncapi":
		_, err := stdout.Write(docs.AsyncAPI())
		return err
	case len(pos) == 1:
		b, err := docs.Schema(pos[0])
		if errors.Is(err, docs.ErrUnknownSchema) {
			var known []string
			for _, e := range docs.Index() {
				known = append(known, e.Name)
			}
			return usageOf("schema", "no schema %q; the schemas are %s", pos[0], strings.Join(known, ", "))
		}
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	case *asJSON:
		_, err := stdout.Write(docs.IndexJSON())
		return err
	case *names:
		for _, e := range docs.Index() {
			fmt.Fprintln(stdout, e.Name)
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIRECTION\tDATA OF\tWHERE")
	for _, e := range docs.Index() {
		what, where := e.Type, strings.Join(e.Subjects, " ")
		switch {
		case e.Direction == docs.Stored && e.Stream != "":
			what, where = "stream message", e.Stream+" "+strings.Join(e.Subjects, " ")
		case e.Direction == docs.Stored:
			what, where = "KV document", e.Bucket+" "+e.Key
		case e.Direction == docs.Shared:
			what, where = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Direction, what, where)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprint(stdout, "\ninterlock schema NAME prints a schema; interlock schema --asyncapi the AsyncAPI document.\n")
	return err
}
