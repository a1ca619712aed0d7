package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/seed"
)

// runSeed ingests the seeds into the database, or with --diff reports drift between the
// seeds and the database without writing. Each file defaults to the copy compiled into the
// binary. Exit status: 0 done (for --diff: no drift), 1 drift found (--diff) or a failure,
// 2 usage error.
func runSeed(ctx context.Context, env *cliEnv, args []string) int {
	fs := flag.NewFlagSet("oikos seed", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	diff := fs.Bool("diff", false, "report drift between the seeds and the database; write nothing")
	ontologyFile := fs.String("ontology", "", "ontology file (default: the embedded seeds/ontology.yaml)")
	inventoryFile := fs.String("inventory", "", "inventory file: your fleet, as `oikos export` writes it (default: no fleet)")
	demo := fs.Bool("demo", false, "seed the demo fleet (the lab simulator's inventory) instead of an inventory file")
	knowledgeFile := fs.String("knowledge", "", "knowledge file (default: the embedded seeds/knowledge.yaml)")
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: oikos seed [--diff] [--ontology FILE] [--inventory FILE | --demo] [--knowledge FILE]")
		fs.PrintDefaults()
	}
	if status, ok := parseFlagsOnly(fs, args); !ok {
		return status
	}

	files := seed.Embedded()
	for _, f := range []struct {
		path  string
		name  *string
		bytes *[]byte
	}{
		{*ontologyFile, &files.OntologyName, &files.Ontology},
		{*inventoryFile, &files.InventoryName, &files.Inventory},
		{*knowledgeFile, &files.KnowledgeName, &files.Knowledge},
	} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			fmt.Fprintf(env.Stderr, "oikos seed: %v\n", err)
			return 1
		}
		*f.name, *f.bytes = f.path, b
	}
	if *demo && *inventoryFile != "" {
		fmt.Fprintln(env.Stderr, "oikos seed: --demo and --inventory: give one of them")
		return 2
	}
	o, inv, kn, err := seed.Load(files)
	if err == nil && *inventoryFile == "" && !*demo {
		inv = nil // the ontology and the knowledge base only
	}
	if err == nil && *knowledgeFile == "" {
		// The embedded knowledge base is written about the demo fleet; its links to machines
		// this fleet lacks are left out rather than failing the seed.
		kn = seed.KnowledgeFor(kn, inv)
	}
	if err == nil {
		err = seed.Validate(o, inv, kn)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos seed: the seeds are invalid; nothing was written:\n%v\n", err)
		return 1
	}

	pool, err := env.db(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos seed: %v\n", err)
		return 1
	}
	defer pool.Close()

	if *diff {
		d, err := seed.Diff(ctx, pool, o, inv, kn)
		if err != nil {
			fmt.Fprintf(env.Stderr, "oikos seed --diff: %v\n", err)
			return 1
		}
		if inv == nil {
			// No inventory was given: the fleet in the database is not drift.
			d.Extra = slices.DeleteFunc(d.Extra, func(it seed.DiffItem) bool { return it.Kind != "knowledge" })
		}
		if d.Empty() {
			fmt.Fprintln(env.Stdout, "no drift: the database matches the seeds")
			return 0
		}
		printItems(env.Stdout, "missing from the database", d.Missing)
		printItems(env.Stdout, "in the database but not in the seeds", d.Extra)
		printItems(env.Stdout, "different", d.Changed)
		return 1
	}

	svc, err := graph.New(graph.Options{Pool: pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos seed: %v\n", err)
		return 1
	}
	rep, err := seed.Ingest(ctx, svc, o, inv, kn, seed.Options{Logger: zerolog.Nop()})
	if err != nil {
		fmt.Fprintf(env.Stderr, "oikos seed: nothing was written: %v\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "seeded: %s\n", rep)
	return 0
}

func printItems(w io.Writer, title string, items []seed.DiffItem) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "%s (%d):\n", title, len(items))
	for _, it := range items {
		fmt.Fprintf(w, "  %s\n", it)
	}
}
