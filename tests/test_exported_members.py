# The public surface is pinned: every name in __all__ exists, __all__ is
# sorted, and every public class/function of the top level is listed.
import inspect

import jetstream_sync as jss


def test_all_is_sorted_and_complete():
    assert jss.__all__ == sorted(jss.__all__)
    public = {n for n, v in vars(jss).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert public == set(jss.__all__) - {"__version__"}


def test_names_the_contract_promises_are_importable_from_the_top_level():
    for name in ("StreamConfig", "ConsumerConfig", "StreamInfo", "ConsumerInfo", "PubAck", "AccountInfo",
                 "StoredMsg", "MsgMetadata", "RetentionPolicy", "StorageType", "DiscardPolicy", "AckPolicy",
                 "DeliverPolicy", "ReplayPolicy", "JetStreamError", "APIError", "StreamNotFoundError",
                 "ConsumerNotFoundError", "MessageNotFoundError", "StreamNameInUseError", "ConsumerExistsError",
                 "ConsumerDeletedError", "NoHeartbeatError", "TimeoutError", "NoRespondersError",
                 "JetStreamNotEnabledError", "ClientClosedError", "MessageAlreadyAckedError", "connect", "Client"):
        assert name in jss.__all__, name


def test_enums_are_built_from_their_json_value():
    assert jss.StorageType("memory") is jss.StorageType.MEMORY
    assert jss.AckPolicy("explicit") == "explicit"
