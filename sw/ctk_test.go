package sw

import (
	"encoding/json"
	"testing"
)

const ctkHead = "document:\n  dsl: '1.0.3'\n  namespace: default\n  name: ctk\n  version: '1.0.0'\n"

func TestCTKDoAndFlow(t *testing.T) {
	for _, tc := range []struct {
		name, doc, input, output string
		causes                   []string
	}{
		{"sequential sub tasks", `do:
  - compositeExample:
      do:
        - setRed:
            set:
              colors: ${ .colors + ["red"] }
        - setGreen:
            set:
              colors: ${ .colors + ["green"] }
        - setBlue:
            set:
              colors: ${ .colors + ["blue"] }
`, `{}`, `{"colors":["red","green","blue"]}`, []string{
			"workflow started",
			"task /do/0/compositeExample/do/0/setRed completed",
			"task /do/0/compositeExample/do/1/setGreen completed",
			"task /do/0/compositeExample/do/2/setBlue completed",
			"task /do/0/compositeExample completed",
		}},
		{"implicit sequence", `do:
  - setRed:
      set:
        colors: '${ .colors + [ "red" ] }'
  - setGreen:
      set:
        colors: '${ .colors + [ "green" ] }'
  - setBlue:
      set:
        colors: '${ .colors + [ "blue" ] }'
`, `{}`, `{"colors":["red","green","blue"]}`, []string{
			"workflow started", "task /do/0/setRed completed", "task /do/1/setGreen completed", "task /do/2/setBlue completed",
		}},
		{"explicit sequence", `do:
  - setRed:
      set:
        colors: '${ .colors + [ "red" ] }'
      then: setGreen
  - setBlue:
      set:
        colors: '${ .colors + [ "blue" ] }'
      then: end
  - setGreen:
      set:
        colors: '${ .colors + [ "green" ] }'
      then: setBlue
`, `{}`, `{"colors":["red","green","blue"]}`, []string{
			"workflow started", "task /do/0/setRed completed", "task /do/2/setGreen completed", "task /do/1/setBlue completed",
		}},
		{"for", `do:
  - loopColors:
      for:
        each: color
        in: '.colors'
      do:
        - markProcessed:
            set:
              processed: '${ { colors: (.processed.colors + [ $color ]), indexes: (.processed.indexes + [ $index ])} }'
`, `{"colors":["red","green","blue"]}`, `{"processed":{"colors":["red","green","blue"],"indexes":[0,1,2]}}`, []string{
			"workflow started",
			"task /do/0/loopColors/do/0/markProcessed completed",
			"task /do/0/loopColors/do/0/markProcessed completed",
			"task /do/0/loopColors/do/0/markProcessed completed",
			"task /do/0/loopColors completed",
		}},
		{"set", `do:
  - setShape:
      set:
        shape: circle
        size: ${ .configuration.size }
        fill: ${ .configuration.fill }
`, `{"configuration":{"size":{"width":6,"height":6},"fill":{"red":69,"green":69,"blue":69}}}`,
			`{"shape":"circle","size":{"width":6,"height":6},"fill":{"red":69,"green":69,"blue":69}}`, nil},
		{"input filtering", `do:
  - setPlayerId:
      input:
        from: .user.claims.subject
      set:
        playerId: ${ . }
`, `{"user":{"claims":{"subject":"6AsnRgGEB0q2O7ux9JXFAw"}}}`, `{"playerId":"6AsnRgGEB0q2O7ux9JXFAw"}`, nil},
		{"switch matching case", switchDoc("", "") + `  - setRed:
      set:
        colors: '${ .colors + [ "red" ] }'
      then: end
  - setGreen:
      set:
        colors: '${ .colors + [ "green" ] }'
      then: end
`, `{"color":"red"}`, `{"colors":["red"]}`, []string{
			"workflow started", "task /do/0/switchColor completed", "task /do/1/setRed completed",
		}},
		{"switch implicit default", switchDoc("", "      then: end\n") + `  - setRed:
      set:
        colors: '${ .colors + [ "red" ] }'
  - setGreen:
      set:
        colors: '${ .colors + [ "green" ] }'
`, `{"color":"yellow"}`, `{"color":"yellow"}`, []string{"workflow started", "task /do/0/switchColor completed"}},
		{"switch explicit default", switchDoc("        - anyOtherColor:\n            then: setCustomColor\n", "") + `  - setRed:
      set:
        colors: '${ .colors + [ "red" ] }'
  - setGreen:
      set:
        colors: '${ .colors + [ "green" ] }'
  - setCustomColor:
      set:
        colors: '${ .colors + [ $input.color ] }'
`, `{"color":"yellow"}`, `{"colors":["yellow"]}`, []string{
			"workflow started", "task /do/0/switchColor completed", "task /do/3/setCustomColor completed",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, ctkHead+tc.doc)
			d.run(tc.input)
			d.wantOutput(tc.output)
			if tc.causes != nil {
				d.wantCauses(tc.causes...)
			}
		})
	}
}

func switchDoc(extraCase, switchThen string) string {
	return `do:
  - switchColor:
      switch:
        - red:
            when: '.color == "red"'
            then: setRed
        - green:
            when: '.color == "green"'
            then: setGreen
` + extraCase + switchThen
}

func TestCTKFork(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - branchWithCompete:
      fork:
        compete: true
        branches:
          - setRed:
              set:
                colors: ${ .colors + ["red"] }
          - setGreen:
              set:
                colors: ${ .colors + ["green"] }
          - setBlue:
              set:
                colors: ${ .colors + ["blue"] }
`)
	d.run(`{}`)
	d.wantOutput(`{"colors":["red"]}`)
	d.wantCauses("workflow started", "task /do/0/branchWithCompete/fork/branches/0/setRed completed", "task /do/0/branchWithCompete completed")
	if len(d.cancels) != 2 {
		t.Errorf("cancelled %v, want the two losing ticks", d.cancels)
	}
}

func TestCTKCallAndDataFlow(t *testing.T) {
	for _, tc := range []struct {
		name, doc, input, output string
		props                    []string
	}{
		{"http content output", `do:
  - findPet:
      call: http
      with:
        method: get
        endpoint:
          uri: https://petstore.swagger.io/v2/pet/findByStatus?status={status}
      output:
        as: .[0]
`, `{"status":"available"}`, `{"id":1,"name":"x","status":"available"}`, nil},
		{"http response output", `do:
  - getPet:
      call: http
      with:
        method: get
        endpoint:
          uri: https://petstore.swagger.io/v2/pet/{petId}
        output: response
`, `{"petId":1}`, "", []string{"request", "headers", "statusCode", "content"}},
		{"basic auth", `do:
  - login:
      call: http
      with:
        method: get
        endpoint:
          uri: https://httpbin.org/basic-auth/{username}/{password}
          authentication:
            basic:
              username: ${ .username }
              password: ${ .password }
`, `{"username":"serverless-workflow","password":"conformance-test"}`, `{"authenticated":true}`, nil},
		{"openapi content output", `do:
  - findPet:
      call: openapi
      with:
        document:
          endpoint: "https://petstore.swagger.io/v2/swagger.json"
        operationId: findPetsByStatus
        parameters:
          status: ${ .status }
      output:
        as: . | length
`, `{"status":"available"}`, `1`, nil},
		{"openapi response output", `do:
  - getPet:
      call: openapi
      with:
        document:
          endpoint: "https://petstore.swagger.io/v2/swagger.json"
        operationId: getPetById
        parameters:
          petId: ${ .petId }
        output: response
`, `{"petId":1}`, "", []string{"request", "headers", "statusCode", "content"}},
		{"output filtering", `do:
  - getPet:
      call: http
      with:
        method: get
        endpoint:
          uri: https://petstore.swagger.io/v2/pet/{petId}
      output:
        as: .id
`, `{"petId":1}`, `1`, nil},
		{"non-object output", `do:
  - getPetById1:
      call: http
      with:
        method: get
        endpoint:
          uri: https://petstore.swagger.io/v2/pet/{petId}
      output:
        as: .id
  - getPetById2:
      call: http
      with:
        method: get
        endpoint:
          uri: https://petstore.swagger.io/v2/pet/2
      output:
        as: '{ ids: [ $input, .id ] }'
`, `{"petId":1}`, `{"ids":[1,2]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t, ctkHead+tc.doc)
			d.http = petstore
			d.run(tc.input)
			if tc.output != "" {
				d.wantOutput(tc.output)
			}
			var out map[string]json.RawMessage
			if len(tc.props) > 0 {
				if err := json.Unmarshal(d.last.Output, &out); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range tc.props {
				if _, ok := out[p]; !ok {
					t.Errorf("output has no %s: %s", p, d.last.Output)
				}
			}
		})
	}
}

func TestCTKHTTPRequest(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - login:
      call: http
      with:
        method: get
        endpoint:
          uri: https://httpbin.org/basic-auth/{username}/{password}
          authentication:
            basic:
              username: ${ .username }
              password: ${ .password }
`)
	var got httpRequest
	d.http = func(r httpRequest) Result { got = r; return Result{Output: json.RawMessage(`{}`)} }
	d.run(`{"username":"u","password":"p"}`)
	b, _ := json.Marshal(got)
	jsonEqual(t, "request", b, `{"kind":"http","method":"get","uri":"https://httpbin.org/basic-auth/{username}/{password}",
		"output":"content","auth":{"basic":{"username":"u","password":"p"}},"vars":{"username":"u","password":"p"},"pointer":"/do/0/login"}`)
	d.wantCauses("workflow started", "task /do/0/login completed")
}

func TestCTKEmit(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - emitEvent:
      emit:
        event:
          with:
            source: https://fake-source.com
            type: com.fake-source.user.greeted.v1
            data:
              greetings: ${ "Hello \(.user.firstName) \(.user.lastName)!" }
`)
	d.run(`{"user":{"firstName":"John","lastName":"Doe"}}`)
	d.wantOutput(`{"id":"wf1-sw-1","specversion":"1.0","time":"2026-01-02T03:04:05Z","source":"https://fake-source.com",
		"type":"com.fake-source.user.greeted.v1","data":{"greetings":"Hello John Doe!"}}`)
	if d.items[0].Kind != ItemEmit || d.items[0].ID != "sw-1" {
		t.Errorf("first item %+v", d.items[0])
	}

	// With a timeout (a timer item) the event still carries its own item's id.
	d = newDriver(t, ctkHead+`do:
  - first:
      set:
        a: 1
  - emitEvent:
      emit:
        event:
          with:
            source: s
            type: t
            subject: ${ "order-\(.a)" }
      timeout:
        after: PT1M
`)
	d.run(`{}`)
	d.wantOutput(`{"id":"wf1-sw-2","specversion":"1.0","time":"2026-01-02T03:04:05Z","source":"s","type":"t","subject":"order-1"}`)
	if d.items[1].ID != "sw-2" || d.items[1].Kind != ItemEmit || d.items[2].Kind != ItemTimer {
		t.Errorf("items %+v", d.items)
	}
	if len(d.rt.Items) != 0 {
		t.Errorf("the timeout timer is still pending: %v", d.rt.Items)
	}
}

func TestCTKRaise(t *testing.T) {
	d := newDriver(t, ctkHead+`do:
  - raiseError:
      raise:
        error:
          status: 400
          type: https://serverlessworkflow.io/errors/types/compliance
          title: Compliance Error
`)
	d.run(`{}`)
	d.wantFault(Error{Status: 400, Type: "https://serverlessworkflow.io/errors/types/compliance", Title: "Compliance Error", Instance: "/do/0/raiseError"})
	d.wantCauses("workflow started", "task /do/0/raiseError faulted: Compliance Error")
}

func tryDoc(status string) string {
	return ctkHead + `do:
  - tryGetPet:
      try:
        - getPet:
            call: http
            with:
              method: get
              endpoint:
                uri: https://petstore.swagger.io/v2/pet/getPetByName/{petName}
      catch:
        errors:
          with:
            type: https://serverlessworkflow.io/dsl/errors/types/communication
            status: ` + status + `
        as: err
        do:
          - setError:
              set:
                error: ${ $err }
`
}

func TestCTKTry(t *testing.T) {
	d := newDriver(t, tryDoc("404"))
	d.http = petstore
	d.run(`{"petName":"Milou"}`)
	d.wantOutput(`{"error":{"type":"https://serverlessworkflow.io/spec/1.0.0/errors/communication","status":404,"title":"Not Found","instance":"/do/0/tryGetPet/try/0/getPet"}}`)
	d.wantCauses("workflow started", "task /do/0/tryGetPet/try/0/getPet faulted: Not Found", "task /do/0/tryGetPet/catch/do/0/setError completed",
		"task /do/0/tryGetPet completed")

	d = newDriver(t, tryDoc("503"))
	d.http = petstore
	d.run(`{"petName":"Milou"}`)
	d.wantFault(Error{Type: ErrorType(KindCommunication), Status: 404, Title: "Not Found", Instance: "/do/0/tryGetPet/try/0/getPet"})
}

func TestReusableAuthenticationAndExpressionEndpoint(t *testing.T) {
	d := newDriver(t, ctkHead+`use:
  authentications:
    petStoreAuth:
      bearer:
        token: ${ .token }
do:
  - getPet:
      call: http
      with:
        method: get
        endpoint:
          uri: https://petstore.swagger.io/v2/pet/{petId}
          authentication:
            use: petStoreAuth
        headers:
          x-count: ${ .petId }
        query:
          q: plain
  - next:
      call: openapi
      with:
        document:
          endpoint: ${ "https://petstore.swagger.io/" + "v2/swagger.json" }
        operationId: getPetById
        parameters:
          petId: 3
`)
	var reqs []httpRequest
	d.http = func(r httpRequest) Result {
		reqs = append(reqs, r)
		return Result{Output: json.RawMessage(`{"token":"t2","petId":2}`)}
	}
	d.run(`{"token":"secret","petId":1}`)
	if len(reqs) != 2 {
		t.Fatalf("requests %+v", reqs)
	}
	b, _ := json.Marshal(reqs[0])
	jsonEqual(t, "request", b, `{"kind":"http","method":"get","uri":"https://petstore.swagger.io/v2/pet/{petId}","headers":{"x-count":"1"},
		"query":{"q":"plain"},"output":"content","auth":{"bearer":{"token":"secret"}},"vars":{"token":"secret","petId":1},"pointer":"/do/0/getPet"}`)
	b, _ = json.Marshal(reqs[1])
	jsonEqual(t, "request", b, `{"kind":"openapi","output":"content","document":"https://petstore.swagger.io/v2/swagger.json","operationId":"getPetById",
		"parameters":{"petId":3},"vars":{"token":"t2","petId":2},"pointer":"/do/1/next"}`)
}
