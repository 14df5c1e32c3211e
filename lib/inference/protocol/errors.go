package protocol

import "net/http"

// ErrorResponse is the error body of every server of the project. OpenAI's clients (go-openai,
// the Python and npm SDKs) read the nested "error" object; SGLang's and older vLLM's clients read
// the top-level object/message/type/code of their ErrorResponse. A body for an inference server
// (ServerError) fills both; the capture proxy, an OpenAI-compatible API, sends only "error"
// (APIError), whose param names the offending field and whose code is OpenAI's string code.
type ErrorResponse struct {
	Object  string      `json:"object,omitempty"`
	Message string      `json:"message,omitempty"`
	Type    string      `json:"type,omitempty"`
	Code    int         `json:"code,omitempty"`
	Error   ErrorDetail `json:"error"`
}

// ErrorDetail is OpenAI's error object: message, type, param (the field, or null) and code
// (an OpenAI string code, an HTTP status from SGLang/vLLM, or null).
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

// ErrorType names an HTTP status as vLLM's and SGLang's error bodies do.
func ErrorType(status int) string {
	switch {
	case status == http.StatusNotFound:
		return "NotFoundError"
	case status == http.StatusTooManyRequests:
		return "RateLimitError"
	case status >= 500:
		return "ServiceUnavailableError"
	}
	return "BadRequestError"
}

// ServerError is an inference server's error body (tau2-sampler, the scripted test server):
// SGLang's top-level fields and OpenAI's nested error, with the status as code.
func ServerError(status int, msg string) ErrorResponse {
	typ := ErrorType(status)
	return ErrorResponse{Object: "error", Message: msg, Type: typ, Code: status,
		Error: ErrorDetail{Message: msg, Type: typ, Code: status}}
}

// WriteServerError answers ServerError(status, msg).
func WriteServerError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, ServerError(status, msg))
}

// APIError is OpenAI's error body alone: {"error": {"message", "type", "param", "code"}}, with
// param and code null when empty.
func APIError(typ, msg, param, code string) ErrorResponse {
	d := ErrorDetail{Message: msg, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = code
	}
	return ErrorResponse{Error: d}
}
