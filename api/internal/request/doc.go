// Package request is what the api's HTTP surfaces share about a request and its answer: the
// bearer-token guard (a verified principal on the context), the correlation id, strict JSON
// body decoding under a size limit, query and path parameters, paging, and RFC 9457 problem
// documents for every error.
//
// httpapi (the graph, reads and the event stream), execapi (gated executions) and metricsapi
// (metrics and drift) answer to one contract, api/openapi.yaml: the same problem shape, the
// same status for the same mistake, the same list envelope. One copy of these rules is what
// keeps them the same; a surface adds only its own errors, as a Mapper passed to Render.
package request
