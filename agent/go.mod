module github.com/oikos-hq/oikos/agent

go 1.26.0

require (
	github.com/oikos-hq/oikos/shared v0.0.0
	github.com/oikos-hq/oikos/migrations v0.0.0
	github.com/oikos-hq/oikos/seeds v0.0.0
)

replace (
	github.com/oikos-hq/oikos/shared => ../shared
	github.com/oikos-hq/oikos/migrations => ../migrations
	github.com/oikos-hq/oikos/seeds => ../seeds
)
