package httpapi

// VariablesPatch is variablesPatch, for the tests of package httpapi_test.
var VariablesPatch = variablesPatch
