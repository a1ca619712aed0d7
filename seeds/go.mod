module github.com/oikos-hq/oikos/seeds

go 1.26.0
