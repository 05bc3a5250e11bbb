# The mawk reference of bench/run.py: read a vLLM log and extract, per line, the fields vllmlog's parser gives
# for the busy lines (level, time, source, kind, request id, the numbers of request / stats / access / decode
# lines), one tab-separated record per line on stdout; at the end, per-kind counts and a check answer (distinct
# requests, finished ones, sum of max_tokens) on stderr. Written for speed the way one would by hand (awk's own
# field splitting, index() before any regex); it does not group multi-line records, decode JSON records or
# check envelopes: it does less than vllmlog, never more.
#
#     mawk -f bench/ref/extract.awk server.log > /dev/null
BEGIN { OFS = "\t" }
{
    o = 0
    if (substr($1, 1, 1) == "(") { o = 1; while (o < NF && substr($o, length($o)) != ")") o++ }   # (Proc pid=N)
    lvl = $(o + 1); kind = "unparsed"; ts = ""; rid = ""; f1 = ""; f2 = ""
    if (lvl == "INFO" || lvl == "DEBUG" || lvl == "WARNING" || lvl == "ERROR" || lvl == "CRITICAL") {
        ts = $(o + 2) " " $(o + 3); w = $(o + 5); kind = "log"
        if (w == "Decode") { kind = "decode_step"; f1 = $(o + 7); rid = $(o + 9); f2 = $(o + 12) }
        else if (w == "Received") { kind = "request_received"; rid = $(o + 7)
            if (match($0, /max_tokens=[0-9]+/)) { f1 = substr($0, RSTART + 11, RLENGTH - 11); mt += f1 } }
        else if (w == "Added") { kind = "request_added"; rid = $(o + 7) }
        else if (w == "Generated") { kind = "response_generated"; rid = $(o + 7); f1 = $NF }
        else if (w == "Aborted") { kind = "request_aborted"; rid = $(o + 7) }
        else if (w == "Engine" || w == "Avg") { kind = "engine_stats"; f1 = $(o + 9); f2 = $(o + 14) }
        else if (w == "Request" && $(o + 7) == "finished.") { kind = "request_finished"; rid = $(o + 6); fin[rid] = 1; f1 = $NF }
        else if (w == "Prefill" || w == "Scheduling") { kind = "request_step"; rid = $(o + 8) }
    } else if (lvl == "INFO:" || lvl == "WARNING:" || lvl == "ERROR:") {
        kind = "http_access"; f1 = $(o + 6); f2 = $(o + 7)
    } else if (substr($0, 1, 1) == "{") kind = "json"
    count[kind]++
    if (rid != "") req[rid] = 1
    print kind, ts, lvl, rid, f1, f2
}
END {
    nreq = 0; for (r in req) nreq++
    nfin = 0; for (r in fin) nfin++
    for (k in count) printf "%s\t%d\n", k, count[k] > "/dev/stderr"
    printf "requests\t%d\tfinished\t%d\tmax_tokens\t%d\n", nreq, nfin, mt > "/dev/stderr"
}
