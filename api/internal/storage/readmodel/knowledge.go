package readmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Knowledge kinds, as knowledge_entities.kind allows.
var KnowledgeKinds = storage.KnowledgeKinds

// SearchHit is one ranked search result: enough to choose a document, with a snippet of the
// matching text; the whole body is read with GetKnowledge.
type SearchHit struct {
	ID        string    `json:"id"`
	Slug      string    `json:"slug"`
	Kind      string    `json:"kind"`
	Title     string    `json:"title"`
	Tags      []string  `json:"tags"`
	Rank      float32   `json:"rank"`
	Snippet   string    `json:"snippet"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SearchFilter is a knowledge search.
type SearchFilter struct {
	// Q is a web-search style query (words, "phrases", -exclusions, or).
	Q     string
	Kinds []string
	// After continues a page: the rank and slug of the last hit (see SearchCursor).
	After *SearchCursor
	Limit int
}

// SearchCursor is the keyset of a search page: rank descending, then slug.
type SearchCursor struct {
	Rank float32
	Slug string
}

// String encodes the cursor; the rank is written with float32 precision so that the value
// sent back compares equal to the one Postgres computes again.
func (c SearchCursor) String() string {
	return strconv.FormatFloat(float64(c.Rank), 'g', -1, 32) + "|" + c.Slug
}

// ParseSearchCursor decodes SearchCursor.String.
func ParseSearchCursor(s string) (SearchCursor, error) {
	r, slug, ok := strings.Cut(s, "|")
	if !ok || slug == "" {
		return SearchCursor{}, errors.New("malformed search cursor")
	}
	f, err := strconv.ParseFloat(r, 32)
	if err != nil || math.IsNaN(f) {
		return SearchCursor{}, errors.New("malformed search cursor")
	}
	return SearchCursor{Rank: float32(f), Slug: slug}, nil
}

// snippetOptions: up to two fragments of about 20 words, matches marked in markdown bold so
// the dashboard and the agent see them without any HTML.
const snippetOptions = `StartSel=**, StopSel=**, MaxWords=24, MinWords=8, MaxFragments=2, FragmentDelimiter=" … "`

// qSearch is the head of a knowledge search (searchSQL adds the query's placeholders, the
// filters and the page), qSearchHits the hits' CTE, qSearchPage the page and its snippets.
const (
	qSearch     = `WITH tsq AS (SELECT websearch_to_tsquery('english', `
	qSearchHits = `) AS q),
		hits AS (
			SELECT k.entity_id, e.slug, k.kind, k.title, k.tags, k.body, k.updated_at, ts_rank(k.search, tsq.q) AS rank, tsq.q
			FROM knowledge_entities k JOIN entities e ON e.id = k.entity_id, tsq
			WHERE `
	qSearchPage = `
		), page AS (
			SELECT * FROM hits h`
	qSearchSelect = `
		)
		SELECT p.entity_id::text, p.slug, p.kind, p.title, p.tags, p.rank,
			ts_headline('english', p.body, p.q, `
	qSearchEnd = `), p.updated_at
		FROM page p ORDER BY p.rank DESC, p.slug`
	// qSearchPlanner is set for the search's transaction alone (see SearchKnowledge).
	qSearchPlanner = `SET LOCAL random_page_cost = 1.1`
)

// searchSQL builds the statement of SearchKnowledge.
func searchSQL(f SearchFilter) (string, args) {
	var a args
	q := a.add(f.Q)
	where := []string{"k.search @@ tsq.q"}
	if len(f.Kinds) > 0 {
		where = append(where, "k.kind = ANY("+a.add(f.Kinds)+")")
	}
	cond := ""
	if f.After != nil {
		rk, sl := a.add(f.After.Rank), a.add(f.After.Slug)
		cond = " WHERE (h.rank < " + rk + "::real OR (h.rank = " + rk + "::real AND h.slug > " + sl + "))"
	}
	opts := a.add(snippetOptions)
	sql := qSearch + q + qSearchHits + strings.Join(where, " AND ") + qSearchPage + cond +
		` ORDER BY h.rank DESC, h.slug LIMIT ` + a.add(f.Limit+1) + qSearchSelect + opts + qSearchEnd
	return sql, a
}

// SearchKnowledge ranks knowledge by ts_rank over the weighted title/tags/body vector and
// returns headline snippets. The headline is computed only for the page's rows (it reads
// the whole body, so computing it before the limit would cost a body parse per match).
func (r *Reader) SearchKnowledge(ctx context.Context, f SearchFilter) (Page[SearchHit], error) {
	sql, a := searchSQL(f)
	collect := func(q pg.Querier) ([]SearchHit, error) {
		// An unnamed statement, planned for this query's words: a cached generic plan
		// cannot know how selective they are.
		rows, err := q.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, a...)...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, scanHit)
	}
	var items []SearchHit
	var err error
	if b, ok := r.db.(pg.TxBeginner); ok {
		// Document vectors are TOASTed and compressed; the planner does not cost
		// decompressing them, so at the default random_page_cost it prefers a sequential
		// scan that decompresses every document's vector over the GIN index that touches
		// only the matches (14 ms against 3 ms on 5,000 documents). A transaction-local
		// setting fixes the choice for this query alone.
		err = pg.InTx(ctx, b, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, qSearchPlanner); err != nil {
				return err
			}
			items, err = collect(tx)
			return err
		})
	} else {
		items, err = collect(r.db)
	}
	if err != nil {
		return Page[SearchHit]{}, fmt.Errorf("search knowledge: %w", err)
	}
	return pageOf(items, f.Limit, func(h SearchHit) string { return SearchCursor{Rank: h.Rank, Slug: h.Slug}.String() }), nil
}

func scanHit(row pgx.CollectableRow) (SearchHit, error) {
	var h SearchHit
	err := row.Scan(&h.ID, &h.Slug, &h.Kind, &h.Title, &h.Tags, &h.Rank, &h.Snippet, &h.UpdatedAt)
	if h.Tags == nil {
		h.Tags = []string{}
	}
	return h, err
}

// GetKnowledge returns a knowledge entity's full content by slug or id, with the slugs of
// the entities it is about.
func (r *Reader) GetKnowledge(ctx context.Context, ref string) (storage.Knowledge, error) {
	return storage.GetKnowledge(ctx, r.db, ref, false)
}

// KnowledgeRef is a knowledge entity listed without its body.
type KnowledgeRef struct {
	ID        string    `json:"id"`
	Slug      string    `json:"slug"`
	Kind      string    `json:"kind"`
	Title     string    `json:"title"`
	Tags      []string  `json:"tags"`
	State     string    `json:"state"`
	UpdatedAt time.Time `json:"updated_at"`
}

// qListKnowledge lists knowledge of kind $1 (” for all) after slug $2, $3 rows.
const qListKnowledge = `SELECT e.id::text, e.slug, k.kind, k.title, k.tags, e.state, k.updated_at
		FROM knowledge_entities k JOIN entities e ON e.id = k.entity_id
		WHERE ($1 = '' OR k.kind = $1) AND e.slug > $2
		ORDER BY e.slug LIMIT $3`

// ListKnowledge returns the knowledge base's entries in slug order, of one kind when kind is
// not "" (the dashboard's browsing list: titles without bodies).
func (r *Reader) ListKnowledge(ctx context.Context, kind, after string, limit int) (Page[KnowledgeRef], error) {
	rows, err := r.db.Query(ctx, qListKnowledge, kind, after, limit+1)
	if err != nil {
		return Page[KnowledgeRef]{}, fmt.Errorf("list knowledge: %w", err)
	}
	return collectRefs(rows, limit)
}

func collectRefs(rows pgx.Rows, limit int) (Page[KnowledgeRef], error) {
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (KnowledgeRef, error) {
		var k KnowledgeRef
		err := row.Scan(&k.ID, &k.Slug, &k.Kind, &k.Title, &k.Tags, &k.State, &k.UpdatedAt)
		if k.Tags == nil {
			k.Tags = []string{}
		}
		return k, err
	})
	if err != nil {
		return Page[KnowledgeRef]{}, fmt.Errorf("read knowledge: %w", err)
	}
	return pageOf(items, limit, func(k KnowledgeRef) string { return k.Slug }), nil
}

// qKnowledgeAbout lists the knowledge about entity $1 after slug $2, $3 rows.
const qKnowledgeAbout = `SELECT e.id::text, e.slug, k.kind, k.title, k.tags, e.state, k.updated_at
		FROM relationships r
		JOIN entities e ON e.id = r.source_id
		JOIN knowledge_entities k ON k.entity_id = e.id
		WHERE r.target_id = $1::uuid AND r.type = 'about' AND r.valid_to IS NULL AND e.slug > $2
		ORDER BY e.slug LIMIT $3`

// KnowledgeAbout returns the knowledge with a current `about` edge to the entity, by slug.
func (r *Reader) KnowledgeAbout(ctx context.Context, entityID, after string, limit int) (Page[KnowledgeRef], error) {
	rows, err := r.db.Query(ctx, qKnowledgeAbout, entityID, after, limit+1)
	if err != nil {
		return Page[KnowledgeRef]{}, fmt.Errorf("knowledge about entity: %w", err)
	}
	return collectRefs(rows, limit)
}
