"""Headers mapping and the NATS header-block codec (pure: no server)."""

import pickle

import pytest

from jetstream_sync._headers import DESCRIPTION, STATUS, Headers, decode_headers, encode_headers

# Header blocks exactly as nats-server 2.15 sent them (captured from the wire).
MSG_BLOCK = b"NATS/1.0\r\nNats-Msg-Id: id0\r\nX-Multi: a\r\nlower-key: sp\r\n\r\n"
REPEATED_BLOCK = b"NATS/1.0\r\nX-Multi: a\r\nX-Multi: b\r\nk2:v\r\n\r\n"
NO_MESSAGES = b"NATS/1.0 404 No Messages\r\n\r\n"
REQUEST_TIMEOUT = b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 10\r\nNats-Pending-Bytes: 0\r\n\r\n"
IDLE_HEARTBEAT = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 10\r\nNats-Last-Stream: 4\r\n\r\n"
NO_RESPONDERS = b"NATS/1.0 503\r\n\r\n"


class TestDecode:
    def test_plain_block_maps_each_key_to_its_value(self):
        h = decode_headers(MSG_BLOCK)
        assert isinstance(h, Headers)
        assert h == {"Nats-Msg-Id": "id0", "X-Multi": "a", "lower-key": "sp"}
        assert STATUS not in h

    def test_repeated_key_reads_as_first_value_and_keeps_all(self):
        h = decode_headers(REPEATED_BLOCK)
        assert h["X-Multi"] == "a"
        assert h.get_all("X-Multi") == ["a", "b"]
        assert h.multi() == {"X-Multi": ["a", "b"], "k2": ["v"]}

    def test_value_without_space_after_colon_is_read(self):
        assert decode_headers(REPEATED_BLOCK)["k2"] == "v"

    def test_404_status_line_becomes_status_and_description(self):
        assert decode_headers(NO_MESSAGES) == {STATUS: "404", DESCRIPTION: "No Messages"}

    def test_408_status_keeps_the_pending_counters(self):
        h = decode_headers(REQUEST_TIMEOUT)
        assert h == {
            "Status": "408",
            "Description": "Request Timeout",
            "Nats-Pending-Messages": "10",
            "Nats-Pending-Bytes": "0",
        }

    def test_idle_heartbeat_status_keeps_last_consumer(self):
        h = decode_headers(IDLE_HEARTBEAT)
        assert h[STATUS] == "100"
        assert h[DESCRIPTION] == "Idle Heartbeat"
        assert h["Nats-Last-Consumer"] == "10"

    def test_status_without_description_has_no_description_key(self):
        h = decode_headers(NO_RESPONDERS)
        assert h == {"Status": "503"}
        assert DESCRIPTION not in h

    def test_keys_are_kept_as_sent_and_case_sensitive(self):
        h = decode_headers(b"NATS/1.0\r\nfoo: 1\r\nFOO: 2\r\n\r\n")
        assert h == {"foo": "1", "FOO": "2"}

    def test_values_are_stripped(self):
        assert decode_headers(b"NATS/1.0\r\nA:   spaced out \t\r\n\r\n") == {"A": "spaced out"}

    def test_value_may_contain_colons(self):
        assert decode_headers(b"NATS/1.0\r\nUrl: nats://h:4222\r\n\r\n")["Url"] == "nats://h:4222"

    def test_non_utf8_bytes_are_replaced_not_fatal(self):
        h = decode_headers(b"NATS/1.0\r\nBin: \xff\xfe\r\n\r\n")
        assert h["Bin"] == "\ufffd\ufffd"

    def test_empty_input_is_none(self):
        assert decode_headers(b"") is None
        assert decode_headers(None) is None

    def test_memoryview_and_bytearray_are_accepted(self):
        assert decode_headers(memoryview(MSG_BLOCK)) == decode_headers(bytearray(MSG_BLOCK)) == decode_headers(MSG_BLOCK)

    def test_block_without_trailing_blank_line_is_read(self):
        assert decode_headers(b"NATS/1.0 404 No Messages") == {"Status": "404", "Description": "No Messages"}

    def test_reading_stops_at_the_blank_line(self):
        assert decode_headers(b"NATS/1.0\r\nA: 1\r\n\r\nB: 2\r\n") == {"A": "1"}

    def test_lines_without_colon_are_skipped(self):
        assert decode_headers(b"NATS/1.0\r\ngarbage\r\nA: 1\r\n\r\n") == {"A": "1"}

    def test_block_not_starting_with_version_is_rejected(self):
        with pytest.raises(ValueError, match="NATS"):
            decode_headers(b"HTTP/1.1 200 OK\r\n\r\n")

    def test_plain_messages_allocate_no_multi_value_table(self):
        assert decode_headers(MSG_BLOCK)._multi is None


class TestHeadersMapping:
    def test_is_a_dict_of_first_values(self):
        h = Headers({"a": "1", "b": ["2", "3"]})
        assert isinstance(h, dict)
        assert dict(h) == {"a": "1", "b": "2"}
        assert h.get("b") == "2"

    def test_empty_construction(self):
        h = Headers()
        assert h == {} and h.multi() == {} and h.get_all("x") == []

    def test_get_all_of_missing_key_is_empty_list(self):
        assert Headers({"a": "1"}).get_all("b") == []

    def test_single_element_list_is_one_value_without_multi_table(self):
        h = Headers({"a": ["1"]})
        assert h == {"a": "1"} and h._multi is None

    def test_multi_returns_a_new_dict(self):
        h = Headers({"a": ["1", "2"]})
        m = h.multi()
        m["a"].append("3")
        m["b"] = ["x"]
        assert h.get_all("a") == ["1", "2"] and "b" not in h

    def test_get_all_returns_a_copy(self):
        h = Headers({"a": ["1", "2"]})
        h.get_all("a").append("3")
        assert h.get_all("a") == ["1", "2"]

    def test_from_multi(self):
        h = Headers.from_multi({"a": ["1", "2"], "b": "3"})
        assert h.multi() == {"a": ["1", "2"], "b": ["3"]}

    def test_assignment_replaces_every_value(self):
        h = Headers({"a": ["1", "2"]})
        h["a"] = "9"
        assert h.get_all("a") == ["9"]

    def test_add_appends_a_value(self):
        h = Headers()
        h.add("a", "1")
        h.add("a", "2")
        assert h["a"] == "1" and h.get_all("a") == ["1", "2"]

    def test_delete_and_pop_forget_the_extra_values(self):
        h = Headers({"a": ["1", "2"], "b": ["3", "4"]})
        del h["a"]
        assert h.get_all("a") == []
        assert h.pop("b") == "3"
        assert h.get_all("b") == [] and not h._multi

    def test_update_with_headers_keeps_multi_values(self):
        h = Headers({"x": "0"})
        h.update(Headers({"a": ["1", "2"]}))
        assert h.multi() == {"x": ["0"], "a": ["1", "2"]}

    def test_copy_is_a_headers_with_its_own_values(self):
        h = Headers({"a": ["1", "2"]})
        c = h.copy()
        assert isinstance(c, Headers) and c == h
        c.add("a", "3")
        assert h.get_all("a") == ["1", "2"]

    def test_equality_between_headers_counts_every_value(self):
        assert Headers({"a": ["1", "2"]}) == Headers({"a": ["1", "2"]})
        assert Headers({"a": ["1", "2"]}) != Headers({"a": "1"})
        assert Headers({"a": ["1", "2"]}) == {"a": "1"}  # as a plain dict: first values

    def test_pickles_with_every_value(self):
        h = Headers({"a": ["1", "2"], "b": "3"})
        back = pickle.loads(pickle.dumps(h))
        assert isinstance(back, Headers) and back.multi() == h.multi()

    def test_repr_shows_multi_values(self):
        assert repr(Headers({"a": ["1", "2"], "b": "3"})) == "Headers({'a': ['1', '2'], 'b': '3'})"

    def test_non_str_values_are_rejected_naming_the_key(self):
        with pytest.raises(TypeError, match="'a'"):
            Headers({"a": 1})
        with pytest.raises(TypeError, match="'a'"):
            Headers({"a": ["1", 2]})

    def test_str_enum_keys_are_stored_as_plain_str(self):
        import enum

        class H(str, enum.Enum):
            DESCRIPTION = "Description"

        h = Headers({H.DESCRIPTION: "No Messages"})
        assert type(next(iter(h))) is str and h["Description"] == "No Messages"


class TestEncode:
    def test_one_line_per_value(self):
        assert encode_headers({"Nats-Msg-Id": "id0", "X": "1"}) == b"NATS/1.0\r\nNats-Msg-Id: id0\r\nX: 1\r\n\r\n"

    def test_list_values_become_repeated_lines(self):
        assert encode_headers({"X": ["a", "b"]}) == b"NATS/1.0\r\nX: a\r\nX: b\r\n\r\n"

    def test_headers_instance_encodes_all_its_values(self):
        h = decode_headers(REPEATED_BLOCK)
        assert encode_headers(h) == b"NATS/1.0\r\nX-Multi: a\r\nX-Multi: b\r\nk2: v\r\n\r\n"

    def test_round_trip_through_decode(self):
        h = Headers({"A": ["1", "2"], "b": "x y", "Uni": "caf\u00e9"})
        assert decode_headers(encode_headers(h)) == h

    def test_values_are_utf8(self):
        assert encode_headers({"U": "\u00e9"}) == "NATS/1.0\r\nU: \u00e9\r\n\r\n".encode()

    def test_empty_mapping_encodes_to_no_bytes(self):
        assert encode_headers({}) == b""
        assert encode_headers(Headers()) == b""
        assert encode_headers(None) == b""

    @pytest.mark.parametrize("key", ["", "has space", "co:lon", "tab\t", "caf\u00e9", "nl\n", "\x7f"])
    def test_invalid_names_are_value_errors_naming_the_key(self, key):
        with pytest.raises(ValueError, match="invalid header name"):
            encode_headers({key: "v"})

    def test_invalid_name_message_shows_the_key(self):
        with pytest.raises(ValueError, match="'co:lon'"):
            encode_headers({"co:lon": "v"})

    @pytest.mark.parametrize("value", [b"bytes", 1, None, ["ok", 2]])
    def test_non_str_values_are_type_errors_naming_the_key(self, value):
        with pytest.raises(TypeError, match="'X-Key'"):
            encode_headers({"X-Key": value})

    @pytest.mark.parametrize("value", ["a\r\nInjected: 1", "a\nb", "a\rb", ["ok", "bad\n"]])
    def test_cr_or_lf_in_values_are_value_errors_naming_the_key(self, value):
        with pytest.raises(ValueError, match="'X-Key'"):
            encode_headers({"X-Key": value})
