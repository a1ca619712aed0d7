module github.com/oikos-hq/oikos/migrations

go 1.26.0
