package swtest

// PetstoreSwagger is the stub's /v2/swagger.json: a minimal Swagger 2.0
// description of the petstore operations the scenarios call, with the real
// document's host, basePath and schemes so that a client resolves the same
// URLs as against petstore.swagger.io.
const PetstoreSwagger = `{
  "swagger": "2.0",
  "info": {"title": "Swagger Petstore (stub)", "version": "1.0.0"},
  "host": "petstore.swagger.io",
  "basePath": "/v2",
  "schemes": ["https", "http"],
  "paths": {
    "/pet/findByStatus": {
      "get": {
        "operationId": "findPetsByStatus",
        "produces": ["application/json"],
        "parameters": [{
          "name": "status", "in": "query", "required": true, "type": "array",
          "items": {"type": "string", "enum": ["available", "pending", "sold"]},
          "collectionFormat": "multi"
        }],
        "responses": {"200": {"description": "the pets with that status"}}
      }
    },
    "/pet/{petId}": {
      "get": {
        "operationId": "getPetById",
        "produces": ["application/json"],
        "parameters": [{"name": "petId", "in": "path", "required": true, "type": "integer", "format": "int64"}],
        "responses": {"200": {"description": "the pet"}, "404": {"description": "no such pet"}}
      }
    }
  }
}
`
