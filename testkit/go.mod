module github.com/oikos-hq/oikos/testkit

go 1.26.0

replace (
	github.com/oikos-hq/oikos/migrations => ../migrations
	github.com/oikos-hq/oikos/seeds => ../seeds
	github.com/oikos-hq/oikos/shared => ../shared
)

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/oikos-hq/oikos/migrations v0.0.0
	github.com/oikos-hq/oikos/seeds v0.0.0
	github.com/oikos-hq/oikos/shared v0.0.0
	github.com/rs/zerolog v1.35.1
	github.com/sashabaranov/go-openai v1.43.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/crypto v0.59.0
	mvdan.cc/sh/v3 v3.14.1
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/pressly/goose/v3 v3.30.0 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
