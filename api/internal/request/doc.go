// Package request is what the api's HTTP surfaces share about a request and its answer: the
// route table and how routes are mounted (Route, Mount), the bearer-token guard (a verified
// principal on the context), the correlation id, strict JSON body decoding under a size limit
// (and a clean 413 past it), query and path parameters, paging, the server-sent event writer,
// and RFC 9457 problem documents for every error.
//
// httpapi (the graph, reads and the event stream), execapi (gated executions) and metricsapi
// (metrics and drift) answer to one contract, api/openapi.yaml: the same problem shape, the
// same status for the same mistake, the same list envelope. One copy of these rules is what
// keeps them the same. Each surface declares its routes as a []Route; Mount guards and
// catches every one alike; and ToProblem, over the api's sentinels (api/internal/apierr), is
// the only place an error becomes a status.
package request
