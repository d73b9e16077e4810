"""Hypothesis strategies for every frontend and backend message (shared by wire tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from pgwire import backend as be
from pgwire import frontend as fe

text = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12
)
name = text.filter(bool)
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
u32 = st.integers(0, 2**32 - 1)
blob = st.binary(max_size=24)
value = st.none() | blob
small = {"max_size": 6}

startup_messages = st.one_of(
    st.builds(
        fe.StartupMessage,
        st.dictionaries(name, text, **small),
        st.integers(0, 0xFFFF).map(lambda minor: (3 << 16) | minor),
    ),
    st.just(fe.SSLRequest()),
    st.just(fe.GSSENCRequest()),
    st.builds(fe.CancelRequest, i32, i32),
)

frontend_messages = st.one_of(
    st.builds(fe.PasswordMessage, text),
    st.builds(fe.Query, text),
    st.builds(fe.Parse, text, text, st.lists(u32, **small).map(tuple)),
    st.builds(
        fe.Bind,
        text,
        text,
        st.lists(st.sampled_from([0, 1]), **small).map(tuple),
        st.lists(value, **small).map(tuple),
        st.lists(i16, **small).map(tuple),
    ),
    st.builds(fe.Describe, st.sampled_from("SP"), text),
    st.builds(fe.Close, st.sampled_from("SP"), text),
    st.builds(fe.Execute, text, i32),
    st.just(fe.Sync()),
    st.just(fe.Flush()),
    st.just(fe.Terminate()),
    st.builds(fe.CopyData, blob),
    st.just(fe.CopyDone()),
    st.builds(fe.CopyFail, text),
    st.builds(
        fe.FunctionCall,
        u32,
        st.lists(i16, **small).map(tuple),
        st.lists(value, **small).map(tuple),
        i16,
    ),
)

field_codes = st.sampled_from("SVCMDHPpqWstcdnFLRZ")
fields = st.lists(st.tuples(field_codes, text), max_size=8).map(tuple)

authentication_messages = st.one_of(
    st.just(be.AuthenticationOk()),
    st.just(be.AuthenticationKerberosV5()),
    st.just(be.AuthenticationCleartextPassword()),
    st.builds(be.AuthenticationMD5Password, st.binary(min_size=4, max_size=4)),
    st.just(be.AuthenticationGSS()),
    st.builds(be.AuthenticationGSSContinue, blob),
    st.just(be.AuthenticationSSPI()),
    st.builds(be.AuthenticationSASL, st.lists(name, **small).map(tuple)),
    st.builds(be.AuthenticationSASLContinue, blob),
    st.builds(be.AuthenticationSASLFinal, blob),
)

field_descriptions = st.builds(be.FieldDescription, text, u32, i16, u32, i16, i32, i16)
copy_formats = (st.sampled_from([0, 1]), st.lists(st.sampled_from([0, 1]), **small).map(tuple))

backend_messages = st.one_of(
    authentication_messages,
    st.builds(be.BackendKeyData, i32, i32),
    st.just(be.BindComplete()),
    st.just(be.CloseComplete()),
    st.builds(be.CommandComplete, text),
    st.builds(be.CopyData, blob),
    st.just(be.CopyDone()),
    st.builds(be.CopyInResponse, *copy_formats),
    st.builds(be.CopyOutResponse, *copy_formats),
    st.builds(be.CopyBothResponse, *copy_formats),
    st.builds(be.DataRow, st.lists(value, max_size=8).map(tuple)),
    st.just(be.EmptyQueryResponse()),
    st.builds(be.ErrorResponse, fields),
    st.builds(be.FunctionCallResponse, value),
    st.builds(be.NegotiateProtocolVersion, i32, st.lists(name, **small).map(tuple)),
    st.just(be.NoData()),
    st.builds(be.NoticeResponse, fields),
    st.builds(be.NotificationResponse, i32, text, text),
    st.builds(be.ParameterDescription, st.lists(u32, **small).map(tuple)),
    st.builds(be.ParameterStatus, text, text),
    st.just(be.ParseComplete()),
    st.just(be.PortalSuspended()),
    st.builds(be.ReadyForQuery, st.sampled_from("ITE")),
    st.builds(be.RowDescription, st.lists(field_descriptions, **small).map(tuple)),
)
