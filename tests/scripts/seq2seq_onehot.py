"""An lstm_seq2seq-shaped script: an encoder LSTM and a decoder LSTM on one-hot characters,
padded with the one-hot space vector, no mask. `rnndoctor check` must find the padding of both
inputs at its true fraction (issue 12, defect 4)."""

import keras
from _seq2seq_data import SOURCE_CHARS, TARGET_CHARS, data
from keras import layers

_, _, encoder_in, decoder_in, decoder_out = data()
encoder_inputs = keras.Input(shape=(None, len(SOURCE_CHARS)), name="encoder_inputs")
_, state_h, state_c = layers.LSTM(16, return_state=True, name="encoder")(encoder_inputs)
decoder_inputs = keras.Input(shape=(None, len(TARGET_CHARS)), name="decoder_inputs")
decoded = layers.LSTM(16, return_sequences=True, name="decoder")(
    decoder_inputs, initial_state=[state_h, state_c]
)
outputs = layers.Dense(len(TARGET_CHARS), activation="softmax")(decoded)
model = keras.Model([encoder_inputs, decoder_inputs], outputs)
model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
model.fit([encoder_in, decoder_in], decoder_out, batch_size=64, epochs=2, validation_split=0.2)
