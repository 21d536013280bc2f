# Builds importer/testdata/adk.jsonl (run from importer/testdata): the two traces of volcengine/veadk-python
# tests/test_evaluator.py (TRACE_SET_DATA, spans an ADK agent wrote through
# VeADK's tracer), written as the Collector's file exporter writes OTLP/JSON:
# one ExportTraceServiceRequest per line. Ids converted to hex; attributes
# kept as recorded except the long request/response copies.
import json
def h(n, size): return format(n, '0%dx' % (2*size))
def s(k, v): return {"key": k, "value": {"stringValue": v}}
def i(k, v): return {"key": k, "value": {"intValue": str(v)}}
def span(name, sid, tid, start, end, parent, attrs):
    d = {"traceId": h(tid, 16), "spanId": h(sid, 8), "name": name, "kind": 1,
         "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "attributes": attrs, "status": {}}
    if parent is not None: d["parentSpanId"] = h(parent, 8)
    return d
common = [s("session.id", "veadk_example_session"), s("user.id", "veadk_default_user")]
def llm(sid, tid, start, end, parent, gin, gout, pin, pout, calls):
    a = common + [s("gen_ai.system", "gcp.vertex.agent"), s("gen_ai.request.model", "openai/doubao-seed-1.6-250615"),
                  i("gen_ai.usage.input_tokens", gin), i("gen_ai.usage.output_tokens", gout),
                  s("llm.model_name", "openai/doubao-seed-1.6-250615"),
                  i("llm.token_count.total", pin + pout), i("llm.token_count.prompt", pin), i("llm.token_count.completion", pout)]
    for cid, name, args in calls:
        a += [s("llm.output_messages.0.message.tool_calls.0.tool_call.id", cid),
              s("llm.output_messages.0.message.tool_calls.0.tool_call.function.name", name),
              s("llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", args)]
    a += [i("gen_ai.usage.prompt_tokens", pin), i("gen_ai.usage.completion_tokens", pout), i("gen_ai.usage.total_tokens", pin + pout),
          s("openinference.span.kind", "LLM")]
    return span("call_llm", sid, tid, start, end, parent, a)
def tool(sid, tid, start, end, parent, cid, args, result):
    a = common + [s("gen_ai.system", "gcp.vertex.agent"), s("gen_ai.operation.name", "execute_tool"),
                  s("gen_ai.tool.name", "get_city_weather"),
                  s("gen_ai.tool.description", "Retrieves the weather information of a given city. the args must in English"),
                  s("gen_ai.tool.call.id", cid), s("tool.name", "get_city_weather"), s("tool.parameters", args),
                  s("input.value", args), s("output.value", json.dumps({"id": cid, "name": "get_city_weather", "response": {"result": result}}, separators=(",", ":"))),
                  s("openinference.span.kind", "TOOL")]
    return span("execute_tool get_city_weather", sid, tid, start, end, parent, a)
def agent(sid, tid, start, end, parent):
    a = common + [s("gen_ai.system", "veadk"), s("gen_ai.request.model", "openai/doubao-seed-1.6-250615"),
                  s("gen_ai.response.model", "openai/doubao-seed-1.6-250615"), s("gen_ai.request.type", "completion"),
                  s("openinference.span.kind", "AGENT")]
    return span("agent_run [chat_robot]", sid, tid, start, end, parent, a)
def invocation(sid, tid, start, end):
    return span("invocation [veadk_default_app]", sid, tid, start, end, None, common + [s("openinference.span.kind", "CHAIN")])
T1, T2 = 115143748123782151752771111946932434777, 225149951093293230286974602372571218832
t1 = [tool(5421848634094108689, T1, 1754884672226444000, 1754884672226993000, 7997784243558253239, "call_6ow5622pvcouw3tpvr7rfqtl", '{"city": "Xi\'an"}', "Cool, 18\u00b0C"),
      llm(7997784243558253239, T1, 1754884660688448000, 1754884672227098000, 14844888006539887900, 487, 983, 487, 496,
          [("call_6ow5622pvcouw3tpvr7rfqtl", "get_city_weather", '{"city": "Xi\'an"}')]),
      llm(7789424022423491416, T1, 1754884672227703000, 1754884676664423000, 14844888006539887900, 547, 679, 547, 132, []),
      agent(14844888006539887900, T1, 1754884660688136000, 1754884676664691000, 2943363177785645047),
      invocation(2943363177785645047, T1, 1754884660687962000, 1754884676664833000)]
t2 = [tool(10315930087681041331, T2, 1754884684740875000, 1754884684741386000, 5741673860775380214, "call_4x60qqjspcwxfu3jtsw1m3sh", '{"city": "Beijing"}', "Sunny, 25\u00b0C"),
      llm(5741673860775380214, T2, 1754884677052310000, 1754884684741523000, 8830792093920828159, 584, 900, 584, 316,
          [("call_4x60qqjspcwxfu3jtsw1m3sh", "get_city_weather", '{"city": "Beijing"}')]),
      llm(1294773233164416528, T2, 1754884684742479000, 1754884692281442000, 8830792093920828159, 644, 900, 644, 256, []),
      agent(8830792093920828159, T2, 1754884677050889000, 1754884692281791000, 6624741805060007734),
      invocation(6624741805060007734, T2, 1754884677050051000, 1754884692281935000)]
def req(spans):
    return {"resourceSpans": [{"resource": {"attributes": [s("service.name", "veadk_default_app")]},
             "scopeSpans": [{"scope": {"name": "gcp.vertex.agent"}, "spans": spans}]}]}
with open("adk.jsonl", "w") as f:
    for t in (t1, t2):
        f.write(json.dumps(req(t), separators=(",", ":"), ensure_ascii=False) + "\n")
