# SPDX-License-Identifier: Apache-2.0
# ChainRulesCore rules for LibSoftmax (Zygote and other ChainRules-based AD): the gradients are
# the library's own backward calls. rowsoftmax's pullback differentiates through the stored
# output y (softmax_backward); softmax_dropout's recomputes softmax and mask from x and
# (p, seed, offset) (dropout_backward), so nothing but x is kept. Gradients have x's type.
module LibSoftmaxChainRulesCoreExt

using ChainRulesCore
using LibSoftmax

# The incoming gradient as an array of the forward result's type (an AD system may hand in a
# lazy or differently typed array).
dense_like(y, dy) = (dy = unthunk(dy); dy isa typeof(y) ? dy : copyto!(similar(y), dy))

# The keywords that choose where the backward call runs (the others shape the forward result).
call_keywords(kw) = (; (k => v for (k, v) in pairs(kw) if k in (:backend, :num_threads))...)

function ChainRulesCore.rrule(::typeof(rowsoftmax), x::AbstractVecOrMat; dims::Integer=1,
                              log::Bool=false, kw...)
    y = rowsoftmax(x; dims, log, kw...)
    backend_kw = call_keywords(kw)
    function rowsoftmax_pullback(ȳ)
        ȳ isa AbstractZero && return (NoTangent(), ȳ)
        dx = softmax_backward(y, dense_like(y, ȳ); dims, log, dtype=eltype(x), backend_kw...)
        return (NoTangent(), dx)
    end
    return y, rowsoftmax_pullback
end

function ChainRulesCore.rrule(::typeof(rowlogsoftmax), x::AbstractVecOrMat; kw...)
    y, pullback = ChainRulesCore.rrule(rowsoftmax, x; log=true, kw...)
    return y, pullback
end

# offset is optional in softmax_dropout, so the rule takes it as a vararg to return one tangent
# per argument given.
function ChainRulesCore.rrule(::typeof(softmax_dropout), x::AbstractVecOrMat, p::Real,
                              seed::Integer, offset::Integer...; dims::Integer=1, kw...)
    haskey(kw, :return_mask) &&
        throw(ArgumentError("differentiate softmax_dropout without return_mask"))
    y = softmax_dropout(x, p, seed, offset...; dims, kw...)
    backend_kw = call_keywords(kw)
    function softmax_dropout_pullback(ȳ)
        others = (NoTangent(), NoTangent(), map(_ -> NoTangent(), offset)...)
        ȳ isa AbstractZero && return (NoTangent(), ȳ, others...)
        dx = dropout_backward(x, dense_like(y, ȳ), p, seed, offset...; dims, backend_kw...)
        return (NoTangent(), dx, others...)
    end
    return y, softmax_dropout_pullback
end

end # module
